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

	mu          sync.Mutex
	version     string // negotiated; guarded by mu
	modern      bool   // speaks 2026-07-28; guarded by mu
	initialized bool   // initialize answered (or modern); guarded by mu
	clientInfo  protocol.Implementation
	caps        protocol.ClientCapabilities
	logLevel    protocol.LoggingLevel         // "" until logging/setLevel; guarded by mu
	subs        map[string]bool               // subscribed resource URIs; guarded by mu
	cancels     map[string]context.CancelFunc // in-flight requests by id; guarded by mu
	lastUsed    time.Time                     // guarded by mu
	closed      bool                          // guarded by mu
}

func newSession(g *Gateway, id string, send func([]byte)) *session {
	return &session{g: g, id: id, send: send, subs: map[string]bool{}, cancels: map[string]context.CancelFunc{}, lastUsed: time.Now()}
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// close cancels the session's requests and ends its GET stream.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	cancels := s.cancels
	s.cancels = map[string]context.CancelFunc{}
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	if s.out != nil {
		s.out.close()
	}
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

// handle serves one message of s. A request's answer is returned;
// notifications and responses return nil. reqNotify, when not nil,
// carries notifications that belong to the request (progress, a listen
// stream's notifications): over HTTP the request's own SSE stream.
func (s *session) handle(ctx context.Context, m *protocol.Message, reqNotify func([]byte)) []byte {
	s.touch()
	switch m.Kind {
	case protocol.KindNotification:
		s.notification(m)
		return nil
	case protocol.KindResponse:
		return nil // no server->client requests are sent yet
	}
	if !s.g.begin() {
		return reply(m.ID, nil, errorf(CodeShuttingDown, "mcpvisor gateway is shutting down"))
	}
	defer s.g.end()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := m.ID.String()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return reply(m.ID, nil, errorf(protocol.CodeInvalidRequest, "session closed"))
	}
	s.cancels[key] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.cancels, key)
		s.mu.Unlock()
	}()
	result, rerr := s.request(ctx, m, reqNotify)
	if ctx.Err() != nil && rerr != nil && errors.Is(ctx.Err(), context.Canceled) && m.Method != protocol.MethodSubscriptionsListen {
		// Cancelled by the client: the spec says not to answer.
		if s.wasCancelled(key) {
			return nil
		}
	}
	return reply(m.ID, result, rerr)
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

// request serves one request.
func (s *session) request(ctx context.Context, m *protocol.Message, reqNotify func([]byte)) (any, *protocol.Error) {
	if m.Method == protocol.MethodInitialize {
		return s.initialize(m.Params)
	}
	if m.Method == protocol.MethodDiscover {
		return s.discover(m.Params)
	}
	if m.Method == protocol.MethodPing {
		return struct{}{}, nil
	}
	if perr := s.checkEra(m); perr != nil {
		return nil, perr
	}
	switch m.Method {
	case protocol.MethodToolsList:
		return s.g.listTools(), nil
	case protocol.MethodToolsCall:
		return s.g.callTool(ctx, m.Params, reqNotify)
	case protocol.MethodPromptsList:
		return s.g.listPrompts(), nil
	case protocol.MethodPromptsGet:
		return s.g.getPrompt(ctx, m.Params)
	case protocol.MethodResourcesList:
		return s.g.listResources(), nil
	case protocol.MethodResourcesTemplatesList:
		return s.g.listTemplates(), nil
	case protocol.MethodResourcesRead:
		return s.g.readResource(ctx, m.Params)
	case protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		return s.subscribe(ctx, m.Method == protocol.MethodResourcesSubscribe, m.Params)
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
	}
	return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s", m.Method)
}

// checkEra refuses feature requests of a handshake-era client that has not
// initialized, and reads the stateless-era _meta of a modern request.
func (s *session) checkEra(m *protocol.Message) *protocol.Error {
	s.mu.Lock()
	modern, inited := s.modern, s.initialized || s.version != ""
	s.mu.Unlock()
	if inited && !modern {
		return nil
	}
	var p struct {
		Meta protocol.Meta `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	var version string
	if !p.Meta.Get(protocol.MetaProtocolVersion, &version) {
		if modern {
			return errorf(protocol.CodeInvalidParams, "_meta[%q] is required in protocol version %s", protocol.MetaProtocolVersion, protocol.Version20260728)
		}
		return errorf(protocol.CodeInvalidRequest, "session not initialized: send initialize (or server/discover) first")
	}
	if !protocol.UsesDiscover(version) || !protocol.IsSupported(version) {
		return unsupportedVersion(version)
	}
	s.mu.Lock()
	s.modern, s.version, s.initialized = true, version, true
	p.Meta.Get(protocol.MetaClientInfo, &s.clientInfo)
	p.Meta.Get(protocol.MetaClientCapabilities, &s.caps)
	var level protocol.LoggingLevel
	if p.Meta.Get(protocol.MetaLogLevel, &level) {
		s.logLevel = level
	}
	s.mu.Unlock()
	return nil
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
	res := protocol.DiscoverResult{
		SupportedVersions: modernVersions(),
		Capabilities:      s.g.capabilities(),
		Instructions:      instructions,
	}
	res.Meta = protocol.Meta{}
	_ = res.Meta.Set(protocol.MetaServerInfo, s.g.serverInfo())
	return res, nil
}

// subscribe records a resource subscription (and passes it upstream when
// the backend can).
func (s *session) subscribe(ctx context.Context, on bool, params json.RawMessage) (any, *protocol.Error) {
	var p protocol.SubscribeParams
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, errorf(protocol.CodeInvalidParams, "want {uri}")
	}
	if rs, ok := s.g.b.(ResourceSubscriber); ok {
		server := s.g.serverOfResource(p.URI)
		if server == "" {
			return nil, errorf(protocol.CodeInvalidParams, "no server offers resource %q", p.URI)
		}
		var err error
		if on {
			err = rs.SubscribeResource(ctx, server, p.URI)
		} else {
			err = rs.UnsubscribeResource(ctx, server, p.URI)
		}
		if err != nil {
			return nil, rpcError(err)
		}
	}
	s.mu.Lock()
	if on {
		s.subs[p.URI] = true
	} else {
		delete(s.subs, p.URI)
	}
	s.mu.Unlock()
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
