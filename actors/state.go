package actors

import (
	"encoding/json"
	"time"

	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// State is where a server is in its lifecycle.
type State string

// The server states. Every configured server is always in exactly one.
const (
	// StatePending: configured, waiting for a connect slot (or, when lazy,
	// for first use).
	StatePending State = "pending"
	// StateConnecting: starting, negotiating and listing.
	StateConnecting State = "connecting"
	// StateReady: connected; its tools are in the pool.
	StateReady State = "ready"
	// StateReconnecting: the connection was lost (or a connect failed)
	// and the next attempt waits for its backoff delay (NextRetry). The
	// tools the server offered stay in the pool, and calls wait for it to
	// be ready again (unless Options.FailFast).
	StateReconnecting State = "reconnecting"
	// StateFailed: parked. The failure cannot heal by itself (a config or
	// protocol error) or the episode's reconnect budget is spent; the
	// error says why. Nothing is sent to the server until it is woken: by
	// a call (which waits for one fresh attempt), by Reconnect, or by a
	// config change.
	StateFailed State = "failed"
	// StateNeedsAuth: parked because the server refused the credentials
	// (HTTP 401/403). Woken like StateFailed.
	StateNeedsAuth State = "needs-auth"
	// StateDisabled: disabled in config; never started.
	StateDisabled State = "disabled"
	// StateNeedsApproval: held until the user approves its config entry
	// (ServerConfig.NeedsApproval, which the error repeats); never
	// started, not even by a call or Reconnect.
	StateNeedsApproval State = "needs-approval"
	// StateStopped: removed from the config and shut down.
	StateStopped State = "stopped"
)

// Settled reports whether a server in state s is waiting for nothing:
// connects that are queued or running are not settled. A server waiting
// for its backoff delay is settled.
func (s State) Settled() bool { return s != StatePending && s != StateConnecting }

// Parked reports whether a server in state s makes no requests until it is
// woken.
func (s State) Parked() bool { return s == StateFailed || s == StateNeedsAuth }

// ServerStatus describes one server as of the latest change.
type ServerStatus struct {
	Name            string                  `json:"name"`
	State           State                   `json:"state"`
	Transport       string                  `json:"transport"`
	ProtocolVersion string                  `json:"protocolVersion,omitempty"`
	ServerInfo      protocol.Implementation `json:"serverInfo"`
	// Tools, Resources and Prompts count what the server lists;
	// OfferedTools counts its tools in the pool (after its tools filter;
	// 0 while it is not ready or is toggled off).
	Tools        int    `json:"tools"`
	OfferedTools int    `json:"offeredTools"`
	Resources    int    `json:"resources"`
	Prompts      int    `json:"prompts"`
	InFlight     int    `json:"inFlight"`
	LastError    string `json:"lastError,omitempty"`
	// LastErrorClass classifies LastError (transports.Class): refused,
	// reset, timeout, dns, tls, auth, session-expired, http-4xx,
	// http-5xx, config, closed, canceled or other.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// LastFailure is what LastError meant for supervision
	// (ClassifyFailure): transient, closed, session-expired, auth,
	// config, protocol, call, sandbox or resource-limit.
	LastFailure FailureKind `json:"lastFailure,omitempty"`
	// Sandbox names the mechanism confining the server's live connection
	// (landlock, bwrap, seatbelt); empty when it is not ready or runs
	// unconfined. A sandbox that could not be had leaves the server
	// failed with LastFailure "sandbox".
	Sandbox transports.SandboxMechanism `json:"sandbox,omitempty"`
	// Strikes counts the consecutive transient errors of the live
	// connection (ReconnectPolicy.Strikes of them close it).
	Strikes int `json:"strikes"`
	// Attempt is the number of connect attempts in the current reconnect
	// episode (0 outside one).
	Attempt int `json:"attempt"`
	// NextRetry is when the next attempt starts, while reconnecting.
	NextRetry      time.Time `json:"nextRetry,omitzero"`
	ConnectedSince time.Time `json:"connectedSince"`
	StateSince     time.Time `json:"stateSince"`
	Lazy           bool      `json:"lazy,omitempty"`
	// CachedTools is set while the server's tools come from the
	// discovery cache (Options.DiscoveryCache): a lazy server not yet
	// used in this run.
	CachedTools bool `json:"cachedTools,omitempty"`
	// ToggledOff is set while the host has the server toggled off.
	ToggledOff bool `json:"toggledOff,omitempty"`
	// Latency counts the requests sent to the server through the
	// supervisor (calls, prompts, resource reads, pings) and how long
	// they took.
	Latency LatencyStats `json:"latency"`
	// Auth is the server's authorization (issuer, client, expiry, the
	// scope it asked for when it refused the credentials), for servers
	// that asked for one. It never holds a token.
	Auth *oauth.Status `json:"auth,omitempty"`
	// WithheldTools are the tools the server lists that the pool keeps
	// out because their definition is not pinned (Options.ToolPins),
	// sorted: they wait for the user's approval.
	WithheldTools []string `json:"withheldTools,omitempty"`
	// ListErrors are the lists the server refused (a JSON-RPC error)
	// while its connection is fine: it stays ready without them, and
	// each is retried with backoff until it succeeds.
	ListErrors []ListError `json:"listErrors,omitempty"`
	// Cache is what the server said about caching its discover result and
	// its lists (SEP-2549; 2026-07-28 servers only), while it is
	// connected: nil otherwise.
	Cache *protocol.CacheHints `json:"cache,omitempty"`
	// Capabilities are what the server declared (its extensions
	// included), while it is ready: nil otherwise.
	Capabilities *protocol.ServerCapabilities `json:"capabilities,omitempty"`
	// Config is the server's config entry as the supervisor runs it,
	// secrets included: never serialized.
	Config ServerConfig `json:"-"`
}

// ListError is one list a ready server refused: which (tools, resources
// or prompts), the server's error, how many listings failed in a row,
// and when the next one goes.
type ListError struct {
	List      string    `json:"list"`
	Error     string    `json:"error"`
	Failures  int       `json:"failures"`
	NextRetry time.Time `json:"nextRetry,omitzero"`
}

// EventType names what an Event reports.
type EventType string

// The event types.
const (
	// EventServerState: a server changed state (State, Previous, Err).
	EventServerState EventType = "server_state"
	// EventServerToggled: the host toggled a server off or on again
	// (ToggledOff); its tools, prompts and resources left or rejoined the
	// pool (their diffs follow).
	EventServerToggled EventType = "server_toggled"
	// EventToolsChanged: the tools a server offers in the pool changed.
	// Diff names the qualified tools added, removed and changed (changed:
	// the definition differs, e.g. its schema or description); Tools is
	// the pool's size (MCP tools) after the change. Published after a
	// list_changed re-list, a (re)connect, a toggle, a filter change, a
	// server leaving the pool, and a rename forced by a collision.
	EventToolsChanged EventType = "tools_changed"
	// EventPromptsChanged: the prompts a server offers changed (Diff, by
	// qualified name).
	EventPromptsChanged EventType = "prompts_changed"
	// EventResourcesChanged: the resources and resource templates a
	// server offers changed (Diff, by URI and URI template).
	EventResourcesChanged EventType = "resources_changed"
	// EventResourceUpdated: a server said the resource at URI changed
	// (notifications/resources/updated).
	EventResourceUpdated EventType = "resource_updated"
	// EventLogMessage: a server logged a message (notifications/message):
	// Level, and Data holding the notification's params.
	EventLogMessage EventType = "log_message"
	// EventProgress: a server reported progress (notifications/progress);
	// Data holds the params (progressToken, progress, total, message).
	EventProgress EventType = "progress"
	// EventChannelMessage: a server pushed a channel message
	// (notifications/claude/channel); Data holds {content, meta}.
	EventChannelMessage EventType = "channel_message"
	// EventPermissionRequest: a channel server asked the host for a
	// verdict (notifications/claude/channel/permission_request); Data
	// holds its params, PermissionID the short ID to answer it with
	// (AnswerPermission).
	EventPermissionRequest EventType = "permission_request"
	// EventPermissionAnswered: a channel server's verdict settled a
	// permission request the host relayed (PermissionID; Data holds the
	// verdict {request_id, behavior}).
	EventPermissionAnswered EventType = "permission_answered"
	// EventPollChanged: a polling subscription's result changed (or came
	// in for the first time): PollID, URI for a resource poll, Data the
	// result (a tools/call or resources/read result).
	EventPollChanged EventType = "poll_changed"
	// EventTaskStatus: a server reported a task's new status
	// (notifications/tasks/status): TaskID, Data the task's state.
	EventTaskStatus EventType = "task_status"
	// EventToolDefinitionChanged: a tool's definition is not the one
	// pinned (Options.ToolPins): it changed since the user started relying
	// on it, or it is new on a server seen before. ToolChange names the
	// tool, says whether it is withheld from the pool or offered, and
	// holds the diff. Reported once per definition; the tool stays
	// unpinned (and withheld, if so) until the user approves it and
	// RecheckToolPins (or the next listing) finds it pinned.
	EventToolDefinitionChanged EventType = "tool_definition_changed"
	// EventCollision: two tools (or prompts) came out with the same
	// qualified name; Collision says which one was renamed, and to what.
	// Reported once per collision, when it first appears.
	EventCollision EventType = "collision"
	// EventListFailed: a ready server refused a listing (List: tools,
	// resources or prompts; Err: its error). It stays ready without that
	// list, and the listing is retried with backoff; when one succeeds,
	// the list's *_changed event says what arrived.
	EventListFailed EventType = "list_failed"
	// EventGap: the subscriber missed Dropped events, because it read too
	// slowly (GapReason "slow-subscriber") or because its resume cursor
	// was older than the buffer (GapReason "cursor-too-old").
	EventGap EventType = "gap"
)

// The reasons of a gap event.
const (
	GapSlowSubscriber = "slow-subscriber"
	GapCursorTooOld   = "cursor-too-old"
)

// Event is one entry of the supervisor's event stream. Seq increases by
// one per event for the supervisor's lifetime, so a subscriber can resume
// after the last one it saw. Which fields are set depends on Type.
type Event struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Server string    `json:"server,omitempty"`

	// State, Previous (empty for a server's first event), Err and Failure
	// (what Err means for supervision, see ClassifyFailure) describe an
	// EventServerState.
	State    State       `json:"state,omitempty"`
	Previous State       `json:"previous,omitempty"`
	Err      string      `json:"error,omitempty"`
	Failure  FailureKind `json:"failure,omitempty"`

	// ToggledOff describes an EventServerToggled.
	ToggledOff bool `json:"toggledOff,omitempty"`

	// Diff describes the *_changed events; Tools is the pool's size after
	// an EventToolsChanged.
	Diff  *ListDiff `json:"diff,omitempty"`
	Tools int       `json:"tools,omitempty"`

	// URI names the resource of an EventResourceUpdated.
	URI string `json:"uri,omitempty"`
	// Level is the severity of an EventLogMessage (debug … emergency).
	Level string `json:"level,omitempty"`
	// Data is the notification's params, for the events that carry one
	// (log message, progress, channel message, permission request).
	Data json.RawMessage `json:"data,omitempty"`

	// PermissionID is the short ID of an EventPermissionRequest or
	// EventPermissionAnswered.
	PermissionID string `json:"permissionId,omitempty"`
	// TaskID names the task of an EventTaskStatus.
	TaskID string `json:"taskId,omitempty"`
	// PollID names the polling subscription of an EventPollChanged.
	PollID string `json:"pollId,omitempty"`
	// ChannelSeq is the channel hub's number of an EventChannelMessage
	// (ChannelMessage.Seq).
	ChannelSeq uint64 `json:"channelSeq,omitempty"`

	// List names the list of an EventListFailed: tools, resources or
	// prompts.
	List string `json:"list,omitempty"`

	// Collision describes an EventCollision.
	Collision *Collision `json:"collision,omitempty"`

	// ToolChange describes an EventToolDefinitionChanged.
	ToolChange *ToolChange `json:"toolChange,omitempty"`

	// Dropped and GapReason describe an EventGap.
	Dropped   uint64 `json:"dropped,omitempty"`
	GapReason string `json:"gapReason,omitempty"`
}

// ListDiff is what changed in one server's list of one kind, by pool name
// (qualified name for tools and prompts, URI for resources). Each slice is
// sorted.
type ListDiff struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

// Empty reports whether nothing changed.
func (d *ListDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0
}

// Collision reports a qualified name claimed twice. The holder (a host
// built-in, or the server first by name, then the tool first by name)
// keeps Name; the other is offered as Renamed.
type Collision struct {
	// Kind is "tool" or "prompt".
	Kind string `json:"kind"`
	// Name is the contested qualified name.
	Name string `json:"name"`
	// Holder is who keeps Name: "server/tool", or "built-in".
	Holder string `json:"holder"`
	// Server and Original name the renamed entry as its server lists it.
	Server   string `json:"server"`
	Original string `json:"original"`
	// Renamed is the name it is offered under instead.
	Renamed string `json:"renamed"`
}

// Tool is one entry of the tool pool.
type Tool struct {
	// Name is what a model calls: the built-in's own name, or the
	// qualified name mcp__<server>__<tool> (at most 64 characters; see
	// QualifiedName).
	Name string
	// Builtin is set for the host's own tools (Options.Builtins).
	Builtin bool
	// Server is the configured server name (empty for a built-in).
	Server string
	// Trusted reports whether the server is marked trusted, so that the
	// annotations may be relied on.
	Trusted bool
	// Definition is the tool as the server lists it (Definition.Name is
	// the server's own name for it), its description cut to
	// Options.MaxDescriptionLength.
	Definition protocol.Tool
}

// Resource is a resource with the server that offers it.
type Resource struct {
	Server   string
	Resource protocol.Resource
}

// ResourceTemplate is a resource template with the server that offers it.
type ResourceTemplate struct {
	Server   string
	Template protocol.ResourceTemplate
}

// Prompt is a prompt with the server that offers it.
type Prompt struct {
	// Name is the qualified name: mcp__<server>__<prompt>.
	Name   string
	Server string
	Prompt protocol.Prompt
}
