package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// session is one downstream client: a handshake-era session (HTTP with an
// Mcp-Session-Id, or the stdio connection), or the ephemeral context of
// one stateless-era (2026-07-28) HTTP request.
type session struct {
	g  *Gateway
	id string // Mcp-Session-Id; empty for stdio and stateless requests
	// send delivers a session-level notification frame (list_changed,
	// log messages): to the GET stream's outbox, or to stdout. Nil for a
	// stateless request, which has no session-level channel.
	send func([]byte)
	out  *outbox // HTTP sessions only

	// stateless holds what checkStateless validated of the one request of
	// a stateless-era HTTP session (nil otherwise).
	stateless *statelessRequest

	mu          sync.Mutex
	version     string // negotiated; guarded by mu
	modern      bool   // speaks 2026-07-28; guarded by mu
	initialized bool   // initialize answered (or modern); guarded by mu
	clientInfo  protocol.Implementation
	caps        protocol.ClientCapabilities
	logLevel    protocol.LoggingLevel         // "" until logging/setLevel; guarded by mu
	subs        map[string]bool               // subscribed resource URIs (nil until one); guarded by mu
	cancels     map[string]context.CancelFunc // in-flight requests by id; guarded by mu
	lastUsed    time.Time                     // guarded by mu
	closed      bool                          // guarded by mu
	streams     int                           // GET streams open; guarded by mu
	polls       map[uint64]*pollStream        // polled calls' streams not yet read to their answer (polling.go); guarded by mu
	pollSeq     uint64                        // numbers the poll streams; guarded by mu
	done        chan struct{}                 // closed by close
}

func newSession(g *Gateway, id string, send func([]byte)) *session {
	return &session{g: g, id: id, send: send, cancels: map[string]context.CancelFunc{}, lastUsed: time.Now(), done: make(chan struct{})}
}

// newStatelessSession is the session of one stateless-era HTTP request
// that checkStateless validated.
func newStatelessSession(g *Gateway, sr statelessRequest) *session {
	s := newSession(g, "", nil)
	s.stateless = &sr
	s.modern, s.version, s.initialized, s.clientInfo, s.caps, s.logLevel = true, sr.version, true, sr.clientInfo, sr.caps, sr.logLevel
	return s
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// close cancels the session's requests, ends its GET stream, and
// releases its resource subscriptions.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	cancels := s.cancels
	s.cancels = map[string]context.CancelFunc{}
	uris := make([]string, 0, len(s.subs))
	for uri := range s.subs {
		uris = append(uris, uri)
	}
	clear(s.subs)
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	if s.out != nil {
		s.out.close()
	}
	s.g.releaseAll(s, uris)
}

func (s *session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// accepts reports whether the session takes session-level notifications.
func (s *session) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized && !s.closed && !s.modern && s.send != nil
}

// notify sends a session-level notification.
func (s *session) notify(method string, params any) {
	frame, err := notification(method, params)
	if err != nil {
		s.g.log.Warn().Err(err).Str("method", method).Msg("encoding a notification")
		return
	}
	s.send(frame)
}

func notification(method string, params any) ([]byte, error) {
	m := struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params}
	return json.Marshal(m)
}

// reply encodes the answer to request id: result, or err when not nil.
func reply(id protocol.ID, result any, err *protocol.Error) []byte {
	var b []byte
	var encErr error
	if err != nil {
		b, encErr = protocol.AppendError(nil, id, err)
	} else {
		b, encErr = protocol.AppendResult(nil, id, result)
	}
	if encErr != nil {
		b, _ = protocol.AppendError(nil, id, protocol.NewError(protocol.CodeInternalError, "encoding the result: %v", encErr))
	}
	return b
}

// handle serves one message of s. A request's answer is returned, with
// its error code (0 for a result); notifications and responses return
// nil. reqNotify, when not nil,
// carries notifications that belong to the request (progress, a listen
// stream's notifications): over HTTP the request's own SSE stream.
func (s *session) handle(ctx context.Context, m *protocol.Message, reqNotify func([]byte)) (frame []byte, code int64) {
	s.touch()
	switch m.Kind {
	case protocol.KindNotification:
		s.notification(m)
		return nil, 0
	case protocol.KindResponse:
		s.g.response(s, m)
		return nil, 0
	}
	if !s.g.begin() {
		return reply(m.ID, nil, errorf(CodeShuttingDown, "mcpvisor gateway is shutting down")), CodeShuttingDown
	}
	defer s.g.end()
	ctx, span := s.g.startServerSpan(ctx, s, m)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if span != nil {
		defer func() { endServerSpan(ctx, span, m.Method, frame, code) }()
	}
	key := m.ID.String()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return reply(m.ID, nil, errorf(protocol.CodeInvalidRequest, "session closed")), protocol.CodeInvalidRequest
	}
	s.cancels[key] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.cancels, key)
		s.mu.Unlock()
	}()
	result, rerr := s.request(ctx, m, reqNotify)
	if rerr == nil && s.isModern() {
		result = s.g.modernResult(m.Method, result)
	}
	if ctx.Err() != nil && rerr != nil && errors.Is(ctx.Err(), context.Canceled) && m.Method != protocol.MethodSubscriptionsListen {
		// Cancelled by the client: the spec says not to answer.
		if s.wasCancelled(key) {
			return nil, 0
		}
	}
	if rerr != nil {
		return reply(m.ID, nil, rerr), rerr.Code
	}
	return reply(m.ID, result, nil), 0
}

// wasCancelled reports whether the client cancelled request key (its
// cancel func is gone from the map before the deferred delete).
func (s *session) wasCancelled(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, live := s.cancels[key]
	return !live
}

func (s *session) notification(m *protocol.Message) {
	switch m.Method {
	case protocol.NotificationInitialized:
		s.mu.Lock()
		s.initialized = true
		s.mu.Unlock()
	case protocol.NotificationCancelled:
		var p protocol.CancelledParams
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		s.mu.Lock()
		cancel, ok := s.cancels[p.RequestID.String()]
		delete(s.cancels, p.RequestID.String())
		s.mu.Unlock()
		if ok {
			s.g.metrics.cancelled.Add(1)
			cancel()
		}
	}
}

// isModern reports whether the session speaks the stateless era.
func (s *session) isModern() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modern
}

// request serves one request.
func (s *session) request(ctx context.Context, m *protocol.Message, reqNotify func([]byte)) (any, *protocol.Error) {
	if s.isModern() && mcpserver.RemovedInStateless(m.Method) {
		return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s (not in protocol version %s)", m.Method, protocol.Version20260728)
	}
	if m.Method == protocol.MethodInitialize {
		return s.initialize(m.Params)
	}
	if m.Method == protocol.MethodDiscover {
		return s.discover(m.Params)
	}
	if m.Method == protocol.MethodPing {
		return struct{}{}, nil
	}
	ctx, perr := s.checkEra(ctx, m)
	if perr != nil {
		return nil, perr
	}
	switch m.Method {
	case protocol.MethodToolsList:
		return s.g.listTools(), nil
	case protocol.MethodToolsCall:
		return s.g.callTool(ctx, s, m.Params, reqNotify)
	case protocol.MethodPromptsList:
		return s.g.listPrompts(), nil
	case protocol.MethodPromptsGet:
		return s.g.getPrompt(ctx, s, m.Params, reqNotify)
	case protocol.MethodResourcesList:
		return s.g.listResources(), nil
	case protocol.MethodResourcesTemplatesList:
		return s.g.listTemplates(), nil
	case protocol.MethodResourcesRead:
		return s.g.readResource(ctx, s, m.Params, reqNotify)
	case protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		return s.subscribe(ctx, m.Method == protocol.MethodResourcesSubscribe, m.Params)
	case protocol.MethodCompletionComplete:
		return s.g.complete(ctx, m.Params)
	case protocol.MethodLoggingSetLevel:
		var p protocol.SetLevelParams
		if err := json.Unmarshal(m.Params, &p); err != nil || levelRank(p.Level) < 0 {
			return nil, errorf(protocol.CodeInvalidParams, "logging/setLevel: want a level debug … emergency")
		}
		s.mu.Lock()
		s.logLevel = p.Level
		s.mu.Unlock()
		return struct{}{}, nil
	case protocol.MethodSubscriptionsListen:
		return s.g.listen(ctx, s, m, reqNotify)
	case protocol.MethodTasksGet, protocol.MethodTasksUpdate, protocol.MethodTasksCancel:
		return s.g.taskRequest(ctx, s, m)
	case protocol.MethodSkillsList, protocol.MethodSkillsGet, protocol.MethodResourcesDirectoryRead:
		return s.g.skillsRequest(ctx, s, m)
	}
	return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s", m.Method)
}

// checkEra refuses feature requests of a handshake-era client that has not
// initialized, and validates the _meta of a stateless-era request (see
// checkMeta); the context it returns carries what that _meta says (see
// requestOf).
func (s *session) checkEra(ctx context.Context, m *protocol.Message) (context.Context, *protocol.Error) {
	if s.stateless != nil {
		return withRequest(ctx, *s.stateless), nil // validated with the headers (checkStateless)
	}
	s.mu.Lock()
	modern, inited := s.modern, s.initialized || s.version != ""
	s.mu.Unlock()
	if inited && !modern {
		return ctx, nil
	}
	if _, ok := metaVersion(m.Params); !ok && !modern {
		return ctx, errorf(protocol.CodeInvalidRequest, "session not initialized: send initialize (or server/discover) first")
	}
	sr, perr := checkMeta(m.Params)
	if perr == nil {
		perr = sr.checkVersion()
	}
	if perr != nil {
		return ctx, perr
	}
	s.mu.Lock()
	s.modern, s.version, s.initialized = true, sr.version, true
	if s.send != nil {
		// A lasting session (stdio): its client's capabilities matter
		// for what it is sent. A stateless request's do not.
		s.clientInfo, s.caps = sr.clientInfo, sr.caps
	}
	if sr.logLevel != "" {
		s.logLevel = sr.logLevel
	}
	s.mu.Unlock()
	return withRequest(ctx, sr), nil
}

// requestKey is the context key of a stateless-era request's _meta.
type requestKey struct{}

func withRequest(ctx context.Context, sr statelessRequest) context.Context {
	return context.WithValue(ctx, requestKey{}, &sr)
}

// requestOf returns what the _meta of the stateless-era request being
// served says, or nil for a request of a handshake-era session.
func requestOf(ctx context.Context) *statelessRequest {
	sr, _ := ctx.Value(requestKey{}).(*statelessRequest)
	return sr
}

// capabilities returns the capabilities the client declared for the
// request being served: in its _meta (stateless era), or at initialize.
func (s *session) capabilitiesFor(ctx context.Context) protocol.ClientCapabilities {
	if sr := requestOf(ctx); sr != nil {
		return sr.caps
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

func unsupportedVersion(requested string) *protocol.Error {
	e := errorf(protocol.CodeUnsupportedProtocolVersion, "unsupported protocol version %q", requested)
	e.Data, _ = json.Marshal(protocol.UnsupportedProtocolVersionData{Supported: modernVersions(), Requested: requested})
	return e
}

func modernVersions() []string {
	var out []string
	for _, v := range protocol.SupportedVersions() {
		if protocol.UsesDiscover(v) {
			out = append(out, v)
		}
	}
	return out
}

// capabilities is what the gateway offers downstream.
func (g *Gateway) capabilities() protocol.ServerCapabilities {
	empty := json.RawMessage(`{}`)
	return protocol.ServerCapabilities{
		Tools:        &protocol.ListChangedCapability{ListChanged: true},
		Prompts:      &protocol.ListChangedCapability{ListChanged: true},
		Resources:    &protocol.ResourcesCapability{Subscribe: true, ListChanged: true},
		Logging:      &empty,
		Completions:  &empty,
		Experimental: map[string]json.RawMessage{channelCapability: empty},
	}
}

const instructions = "mcpvisor gateway: the tools, prompts and resources of every server it supervises. " +
	"Tool and prompt names are mcp__<server>__<name>."

func (g *Gateway) serverInfo() protocol.Implementation {
	return protocol.Implementation{Name: "mcpvisor", Title: "mcpvisor gateway", Version: g.opts.Version}
}

// initialize answers the handshake: the client's version when the gateway
// speaks it, else the newest handshake version.
func (s *session) initialize(params json.RawMessage) (any, *protocol.Error) {
	var p protocol.InitializeParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, errorf(protocol.CodeInvalidParams, "initialize: %v", err)
	}
	version := p.ProtocolVersion
	if !protocol.IsSupported(version) || protocol.UsesDiscover(version) {
		version = protocol.LatestHandshakeVersion
	}
	s.mu.Lock()
	s.version, s.clientInfo, s.caps = version, p.ClientInfo, p.Capabilities
	s.mu.Unlock()
	s.g.log.Debug().Str("session", s.id).Str("client", p.ClientInfo.Name).Str("version", version).Msg("downstream session initialized")
	return protocol.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    s.g.capabilities(),
		ServerInfo:      s.g.serverInfo(),
		Instructions:    instructions,
	}, nil
}

// discover answers server/discover (2026-07-28).
func (s *session) discover(params json.RawMessage) (any, *protocol.Error) {
	var p protocol.DiscoverParams
	_ = json.Unmarshal(params, &p)
	var version string
	if p.Meta.Get(protocol.MetaProtocolVersion, &version) && (!protocol.IsSupported(version) || !protocol.UsesDiscover(version)) {
		return nil, unsupportedVersion(version)
	}
	caps := s.g.capabilities()
	// The extensions of the stateless era: tasks (passed on to the
	// servers that support it), and skills while a server offers them.
	caps.Extensions = map[string]json.RawMessage{protocol.ExtensionTasks: json.RawMessage(`{}`)}
	if _, settings := s.g.skillServers(); settings != nil {
		caps.Extensions[protocol.ExtensionSkills] = settings
	}
	res := protocol.DiscoverResult{
		SupportedVersions: modernVersions(),
		Capabilities:      caps,
		Instructions:      instructions,
	}
	res.Meta = protocol.Meta{}
	_ = res.Meta.Set(protocol.MetaServerInfo, s.g.serverInfo())
	return res, nil
}

// subscribe records a resource subscription of the session; the gateway
// holds the URI subscribed upstream while any session wants it.
func (s *session) subscribe(ctx context.Context, on bool, params json.RawMessage) (any, *protocol.Error) {
	var p protocol.SubscribeParams
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, errorf(protocol.CodeInvalidParams, "want {uri}")
	}
	var perr *protocol.Error
	if on {
		perr = s.g.acquireResource(ctx, s, p.URI)
	} else {
		perr = s.g.releaseResource(ctx, s, p.URI)
	}
	if perr != nil && on {
		return nil, perr
	}
	s.mu.Lock()
	closed := s.closed
	if on && !closed {
		if s.subs == nil {
			s.subs = map[string]bool{}
		}
		s.subs[p.URI] = true
	} else {
		delete(s.subs, p.URI)
	}
	s.mu.Unlock()
	if closed && on {
		s.g.releaseAll(s, []string{p.URI}) // closed meanwhile
	}
	if perr != nil {
		return nil, perr
	}
	return struct{}{}, nil
}

// levelRank orders logging levels; -1 for an unknown one.
func levelRank(l protocol.LoggingLevel) int {
	for i, v := range []protocol.LoggingLevel{protocol.LevelDebug, protocol.LevelInfo, protocol.LevelNotice,
		protocol.LevelWarning, protocol.LevelError, protocol.LevelCritical, protocol.LevelAlert, protocol.LevelEmergency} {
		if strings.EqualFold(string(l), string(v)) {
			return i
		}
	}
	return -1
}
