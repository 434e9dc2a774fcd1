package mcpvisor

// The one place where the host's types meet the actors' plain inputs and
// snapshots: what a host gives goes down through plain(), what the actors
// publish comes up through the ...Of functions. Nothing else in the root
// package builds or reads an actors type field by field.

import (
	"github.com/mcpvisor/mcpvisor/actors"
)

// plain is the config as the actors take it.
func (c *ServerConfig) plain() actors.ServerConfig {
	return actors.ServerConfig{
		Config:           c.Config,
		Disabled:         c.Disabled,
		NeedsApproval:    c.NeedsApproval,
		Lazy:             c.Lazy,
		Trust:            c.Trust,
		Tools:            actors.ToolFilter(c.Tools),
		ConnectTimeoutMs: c.ConnectTimeoutMs,
		TimeoutMs:        c.TimeoutMs,
		Reconnect:        c.Reconnect.plain(),
		PingInterval:     actors.Duration(c.PingInterval),
		ProtocolVersion:  c.ProtocolVersion,
		OAuth:            c.OAuth,
		EnvFile:          c.EnvFile,
		Scope:            c.Scope,
	}
}

// serverConfigOf is the host's view of a config the actors run.
func serverConfigOf(c actors.ServerConfig) ServerConfig {
	return ServerConfig{
		Config:           c.Config,
		Disabled:         c.Disabled,
		NeedsApproval:    c.NeedsApproval,
		Lazy:             c.Lazy,
		Trust:            c.Trust,
		Tools:            ToolFilter(c.Tools),
		ConnectTimeoutMs: c.ConnectTimeoutMs,
		TimeoutMs:        c.TimeoutMs,
		Reconnect:        reconnectPolicyOf(c.Reconnect),
		PingInterval:     Duration(c.PingInterval),
		ProtocolVersion:  c.ProtocolVersion,
		OAuth:            c.OAuth,
		EnvFile:          c.EnvFile,
		Scope:            c.Scope,
	}
}

// plainServers converts a set of configs.
func plainServers(servers map[string]ServerConfig) map[string]actors.ServerConfig {
	out := make(map[string]actors.ServerConfig, len(servers))
	for name, sc := range servers {
		out[name] = sc.plain()
	}
	return out
}

func (p ReconnectPolicy) plain() actors.ReconnectPolicy {
	return actors.ReconnectPolicy{
		Strikes: p.Strikes, MaxAttempts: p.MaxAttempts, InitialDelay: actors.Duration(p.InitialDelay),
		Multiplier: p.Multiplier, MaxDelay: actors.Duration(p.MaxDelay), Jitter: p.Jitter,
		StableAfter: actors.Duration(p.StableAfter), ProbeAfter: actors.Duration(p.ProbeAfter),
		ProbeTimeout: actors.Duration(p.ProbeTimeout),
		ListenDelay:  actors.Duration(p.ListenDelay), ListenFailures: p.ListenFailures,
	}
}

func reconnectPolicyOf(p actors.ReconnectPolicy) ReconnectPolicy {
	return ReconnectPolicy{
		Strikes: p.Strikes, MaxAttempts: p.MaxAttempts, InitialDelay: Duration(p.InitialDelay),
		Multiplier: p.Multiplier, MaxDelay: Duration(p.MaxDelay), Jitter: p.Jitter,
		StableAfter: Duration(p.StableAfter), ProbeAfter: Duration(p.ProbeAfter),
		ProbeTimeout: Duration(p.ProbeTimeout),
		ListenDelay:  Duration(p.ListenDelay), ListenFailures: p.ListenFailures,
	}
}

// plain is the options as the actors take them.
func (o *Options) plain() actors.Options {
	builtins := make([]actors.BuiltinTool, len(o.Builtins))
	for i, b := range o.Builtins {
		builtins[i] = actors.BuiltinTool{Definition: b.Definition, Call: b.Call}
	}
	var cache actors.DiscoveryCache
	if o.DiscoveryCache != nil {
		cache = o.DiscoveryCache
	}
	return actors.Options{
		Logger:               o.Logger,
		ClientInfo:           o.ClientInfo,
		Capabilities:         o.Capabilities,
		Roots:                o.Roots,
		Sampling:             actors.SamplingHandler(o.Sampling),
		Elicitation:          actors.ElicitationHandler(o.Elicitation),
		ElicitationURL:       o.ElicitationURL,
		ServerRequestTimeout: o.ServerRequestTimeout,
		Requests:             o.Requests,
		Inputs:               o.Inputs,
		InProcess:            o.InProcess,
		LocalConnectLimit:    o.LocalConnectLimit,
		RemoteConnectLimit:   o.RemoteConnectLimit,
		ConnectTimeout:       o.ConnectTimeout,
		CallTimeout:          o.CallTimeout,
		Builtins:             builtins,
		MaxDescriptionLength: o.MaxDescriptionLength,
		DiscoverTimeout:      o.DiscoverTimeout,
		Reconnect:            o.Reconnect.plain(),
		PingInterval:         o.PingInterval,
		FailFast:             o.FailFast,
		ReplayIdempotent:     o.ReplayIdempotent,
		Permissions:          o.Permissions.plain(),
		ApproveCall:          approveCall(o.ApproveCall),
		MaxFrameSize:         o.MaxFrameSize,
		CloseStdinTimeout:    o.CloseStdinTimeout,
		TerminateTimeout:     o.TerminateTimeout,
		Sandbox:              o.Sandbox,
		EventBuffer:          o.EventBuffer,
		PermissionTimeout:    o.PermissionTimeout,
		OAuth:                actors.OAuthOptions(o.OAuth),
		DiscoveryCache:       cache,
		ToolPins:             actors.PinOptions{Store: pinStore(o.ToolPins.Store), Trusted: actors.PinAction(o.ToolPins.Trusted), Untrusted: actors.PinAction(o.ToolPins.Untrusted)},
		TracerProvider:       o.TracerProvider,
	}
}

func toolOf(t actors.Tool) Tool {
	return Tool{Name: t.Name, Builtin: t.Builtin, Server: t.Server, Trusted: t.Trusted, Definition: t.Definition}
}

func toolsOf(ts []actors.Tool) []Tool {
	out := make([]Tool, len(ts))
	for i, t := range ts {
		out[i] = toolOf(t)
	}
	return out
}

func promptsOf(ps []actors.Prompt) []Prompt {
	if ps == nil {
		return nil
	}
	out := make([]Prompt, len(ps))
	for i, p := range ps {
		out[i] = Prompt{Name: p.Name, Server: p.Server, Prompt: p.Prompt}
	}
	return out
}

func resourcesOf(rs []actors.Resource, ts []actors.ResourceTemplate) ([]Resource, []ResourceTemplate) {
	var res []Resource
	var tmpl []ResourceTemplate
	if rs != nil {
		res = make([]Resource, len(rs))
		for i, r := range rs {
			res[i] = Resource{Server: r.Server, Resource: r.Resource}
		}
	}
	if ts != nil {
		tmpl = make([]ResourceTemplate, len(ts))
		for i, t := range ts {
			tmpl[i] = ResourceTemplate{Server: t.Server, Template: t.Template}
		}
	}
	return res, tmpl
}

func setResultOf(r actors.SetResult) SetResult {
	return SetResult{Added: r.Added, Removed: r.Removed, Changed: r.Changed, Reconnected: r.Reconnected,
		Unchanged: r.Unchanged, Errors: r.Errors, Settled: r.Settled, Unsettled: r.Unsettled}
}

// errorOf is a status's Error: its last error unless it is ready (a
// ready server keeps its last error in LastError for the record).
func errorOf(state State, lastError string) string {
	if state == StateReady {
		return ""
	}
	return lastError
}

func latencyOf(l actors.LatencyStats) LatencyStats {
	return LatencyStats{Calls: l.Calls, Errors: l.Errors, P50: l.P50, P99: l.P99, Sum: l.Sum, Counts: l.Counts}
}

// statusOf converts the actors' snapshot of a server into the host's
// status, with the server's tools in the pool.
func statusOf(st actors.ServerStatus, tools []ToolInfo) ServerStatus {
	if tools == nil {
		tools = []ToolInfo{}
	}
	return ServerStatus{
		Name:            st.Name,
		Status:          StatusOf(State(st.State), st.ToggledOff),
		State:           State(st.State),
		Scope:           st.Config.Scope,
		Config:          redact(serverConfigOf(st.Config)),
		Tools:           tools,
		Transport:       st.Transport,
		ProtocolVersion: st.ProtocolVersion,
		ServerInfo:      st.ServerInfo,
		ToolCount:       st.Tools,
		OfferedTools:    st.OfferedTools,
		Resources:       st.Resources,
		Prompts:         st.Prompts,
		InFlight:        st.InFlight,
		Error:           errorOf(State(st.State), st.LastError),
		LastError:       st.LastError,
		LastErrorClass:  st.LastErrorClass,
		LastFailure:     FailureKind(st.LastFailure),
		Sandbox:         st.Sandbox,
		Strikes:         st.Strikes,
		Attempt:         st.Attempt,
		NextRetry:       st.NextRetry,
		ConnectedSince:  st.ConnectedSince,
		StateSince:      st.StateSince,
		Lazy:            st.Lazy,
		CachedTools:     st.CachedTools,
		ToggledOff:      st.ToggledOff,
		Latency:         latencyOf(st.Latency),
		Auth:            st.Auth,
		WithheldTools:   st.WithheldTools,
		ListErrors:      listErrorsOf(st.ListErrors),
		Cache:           st.Cache,
		Capabilities:    st.Capabilities,
	}
}

// statuses converts every server's snapshot, with its tools from pool.
func statuses(sts []actors.ServerStatus, pool []actors.Tool) []ServerStatus {
	byServer := map[string][]ToolInfo{}
	for _, t := range pool {
		if !t.Builtin {
			byServer[t.Server] = append(byServer[t.Server], toolInfo(toolOf(t)))
		}
	}
	out := make([]ServerStatus, len(sts))
	for i, st := range sts {
		out[i] = statusOf(st, byServer[st.Name])
	}
	return out
}

// eventConverter converts each numbered event once for all the
// subscribers it is delivered to (the bus offers it to them one after
// the other), so that typed events cost one conversion per event, not
// one per subscriber; they share the value (see Event's Concurrency).
//
// Concurrency: convert runs on the registry actor's goroutine only
// (actors.SubscribeAs); nothing else touches the converter.
type eventConverter struct {
	seq  uint64
	last Event
}

func (c *eventConverter) convert(e actors.Event) Event {
	if e.Seq != 0 && e.Seq == c.seq {
		return c.last
	}
	ev := eventOf(e)
	if e.Seq != 0 { // a gap (sequence number 0) is each subscriber's own
		c.seq, c.last = e.Seq, ev
	}
	return ev
}

// eventOf is the typed event of an event the actors published.
func eventOf(e actors.Event) Event {
	h := EventHeader{Seq: e.Seq, Time: e.Time, Type: EventType(e.Type), Server: e.Server}
	switch h.Type {
	case EventServerState:
		return &ServerStateEvent{EventHeader: h, State: State(e.State), Previous: State(e.Previous), Err: e.Err, Failure: FailureKind(e.Failure)}
	case EventServerToggled:
		return &ServerToggledEvent{EventHeader: h, ToggledOff: e.ToggledOff}
	case EventToolsChanged:
		return &ToolsChangedEvent{EventHeader: h, Diff: listDiffOf(e.Diff), Tools: e.Tools}
	case EventPromptsChanged, EventResourcesChanged:
		return &ListChangedEvent{EventHeader: h, Diff: listDiffOf(e.Diff)}
	case EventResourceUpdated:
		return &ResourceUpdatedEvent{EventHeader: h, URI: e.URI, Data: e.Data}
	case EventLogMessage:
		return &LogMessageEvent{EventHeader: h, Level: e.Level, Data: e.Data}
	case EventProgress:
		return &ProgressEvent{EventHeader: h, Data: e.Data}
	case EventChannelMessage:
		return &ChannelMessageEvent{EventHeader: h, Data: e.Data, ChannelSeq: e.ChannelSeq}
	case EventPermissionRequest, EventPermissionAnswered:
		return &PermissionEvent{EventHeader: h, Data: e.Data, PermissionID: e.PermissionID}
	case EventPollChanged:
		return &PollChangedEvent{EventHeader: h, URI: e.URI, Data: e.Data, PollID: e.PollID}
	case EventTaskStatus:
		return &TaskStatusEvent{EventHeader: h, Data: e.Data, TaskID: e.TaskID}
	case EventToolDefinitionChanged:
		ev := &ToolDefinitionChangedEvent{EventHeader: h}
		if c := e.ToolChange; c != nil {
			ev.ToolChange = &ToolChange{Tool: c.Tool, Name: c.Name, Change: c.Change, Action: PinAction(c.Action), Diff: c.Diff, Hash: c.Hash}
		}
		return ev
	case EventCollision:
		ev := &CollisionEvent{EventHeader: h}
		if c := e.Collision; c != nil {
			cp := Collision(*c)
			ev.Collision = &cp
		}
		return ev
	case EventAuthRequired:
		return &AuthRequiredEvent{EventHeader: h, Data: e.Data}
	case EventListFailed:
		return &ListFailedEvent{EventHeader: h, List: e.List, Err: e.Err}
	case EventGap:
		return &GapEvent{EventHeader: h, Dropped: e.Dropped, GapReason: e.GapReason}
	}
	// A kind this version does not know: its header, and nothing lost
	// silently in JSON either (the actors' event, as it was).
	return &unknownEvent{EventHeader: h, raw: e}
}

func listErrorsOf(errs []actors.ListError) []ListError {
	if errs == nil {
		return nil
	}
	out := make([]ListError, len(errs))
	for i, e := range errs {
		out[i] = ListError(e)
	}
	return out
}

func listDiffOf(d *actors.ListDiff) *ListDiff {
	if d == nil {
		return nil
	}
	cp := ListDiff(*d)
	return &cp
}

// pinStore keeps a nil store nil (an interface holding a nil PinStore
// would turn pinning on).
func pinStore(s PinStore) actors.PinStore {
	if s == nil {
		return nil
	}
	return s
}
