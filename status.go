package mcpvisor

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// ConnectionStatus is the five-valued status of the agent SDKs' MCP
// clients (McpServerStatus.status), which a host ported from one reads.
// It is derived from the detailed State (see StatusOf), which
// ServerStatus keeps beside it.
type ConnectionStatus string

// The connection statuses.
const (
	// StatusConnected: ready, and offering its tools.
	StatusConnected ConnectionStatus = "connected"
	// StatusFailed: parked after a failure it cannot heal by itself, or
	// removed (StateFailed, StateStopped).
	StatusFailed ConnectionStatus = "failed"
	// StatusNeedsAuth: the server refused the credentials; a login wakes
	// it (StateNeedsAuth).
	StatusNeedsAuth ConnectionStatus = "needs-auth"
	// StatusPending: on its way to connected, or waiting for something
	// before it starts: a connect slot or first use (StatePending),
	// connecting (StateConnecting), a backoff delay (StateReconnecting),
	// or the user's approval of its entry (StateNeedsApproval).
	StatusPending ConnectionStatus = "pending"
	// StatusDisabled: disabled in its config (StateDisabled), or toggled
	// off by the host in any state (ServerStatus.ToggledOff): it offers
	// no tools.
	StatusDisabled ConnectionStatus = "disabled"
)

// StatusOf maps a detailed state to the five-valued status:
//
//	ready                                          connected
//	pending, connecting, reconnecting, needs-approval  pending
//	failed, stopped                                failed
//	needs-auth                                     needs-auth
//	disabled, or any state while toggled off       disabled
func StatusOf(state State, toggledOff bool) ConnectionStatus {
	if toggledOff {
		return StatusDisabled
	}
	switch state {
	case StateReady:
		return StatusConnected
	case StateFailed, StateStopped:
		return StatusFailed
	case StateNeedsAuth:
		return StatusNeedsAuth
	case StateDisabled:
		return StatusDisabled
	}
	return StatusPending
}

// ServerStatus describes one server as of its latest change.
type ServerStatus struct {
	Name string `json:"name"`
	// Status is the five-valued status an agent SDK reports (see
	// StatusOf); State is the detailed one it is derived from.
	Status ConnectionStatus `json:"status"`
	State  State            `json:"state"`
	// Scope is where the server's entry came from (ServerConfig.Scope):
	// user, project, local, managed, file, or a host's own layer name.
	// Empty when the host gave none.
	Scope string `json:"scope,omitempty"`
	// Config is the server's entry as it runs, its secrets redacted.
	Config StatusConfig `json:"config"`
	// Tools are the server's tools in the pool, sorted by pool name:
	// none while it is not ready or is toggled off, nor those its tools
	// filter drops or that wait for a pin's approval.
	Tools []ToolInfo `json:"tools"`

	Transport       string                  `json:"transport"`
	ProtocolVersion string                  `json:"protocolVersion,omitempty"`
	ServerInfo      protocol.Implementation `json:"serverInfo"`
	// ToolCount, Resources and Prompts count what the server lists;
	// OfferedTools counts its tools in the pool (len(Tools)).
	ToolCount    int `json:"toolCount"`
	OfferedTools int `json:"offeredTools"`
	Resources    int `json:"resources"`
	Prompts      int `json:"prompts"`
	InFlight     int `json:"inFlight"`
	// Error is why the server is not connected, for a failed,
	// needs-auth, reconnecting or pending server that failed before: the
	// field an agent SDK's status (McpServerStatus.error) carries. It is
	// LastError while the server is not ready, empty while it is.
	Error     string `json:"error,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// LastErrorClass classifies LastError (transports.Class): refused,
	// reset, timeout, dns, tls, auth, session-expired, http-4xx,
	// http-5xx, config, closed, canceled or other.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// LastFailure is what LastError meant for supervision
	// (ClassifyFailure).
	LastFailure FailureKind `json:"lastFailure,omitempty"`
	// Sandbox names the mechanism confining the server's live connection;
	// empty when it is not ready or runs unconfined.
	Sandbox transports.SandboxMechanism `json:"sandbox,omitempty"`
	// Strikes counts the consecutive transient errors of the live
	// connection (ReconnectPolicy.Strikes of them close it).
	Strikes int `json:"strikes"`
	// Attempt is the number of connect attempts in the current reconnect
	// episode (0 outside one); NextRetry is when the next one starts.
	Attempt        int       `json:"attempt"`
	NextRetry      time.Time `json:"nextRetry,omitzero"`
	ConnectedSince time.Time `json:"connectedSince"`
	StateSince     time.Time `json:"stateSince"`
	Lazy           bool      `json:"lazy,omitempty"`
	// CachedTools is set while the server's tools come from the
	// discovery cache (Options.DiscoveryCache).
	CachedTools bool `json:"cachedTools,omitempty"`
	// ToggledOff is set while the host has the server toggled off.
	ToggledOff bool `json:"toggledOff,omitempty"`
	// Latency counts the requests sent to the server through the
	// supervisor and how long they took.
	Latency LatencyStats `json:"latency"`
	// Auth is the server's authorization (never a token), for servers
	// that asked for one.
	Auth *oauth.Status `json:"auth,omitempty"`
	// WithheldTools are the tools kept out of the pool until their
	// definitions are approved (Options.ToolPins), sorted.
	WithheldTools []string `json:"withheldTools,omitempty"`
	// ListErrors are the lists the server refused with a JSON-RPC error
	// while its connection is fine: it stays connected without them, and
	// each listing is retried with backoff until it succeeds.
	ListErrors []ListError `json:"listErrors,omitempty"`
	// Cache is what a 2026-07-28 server said about caching its lists,
	// while it is connected.
	Cache *protocol.CacheHints `json:"cache,omitempty"`
	// Capabilities are what the server declared, while it is ready.
	Capabilities *protocol.ServerCapabilities `json:"capabilities,omitempty"`
	// Member is, in cluster mode (ClusterMember.Status), the id of the
	// member that runs the server; empty for a single supervisor.
	Member string `json:"member,omitempty"`
}

// ListError is one list a connected server refused.
type ListError struct {
	// List is tools, resources or prompts; Error is the server's error.
	List  string `json:"list"`
	Error string `json:"error"`
	// Failures counts the listings that failed in a row; NextRetry is
	// when the next one goes.
	Failures  int       `json:"failures"`
	NextRetry time.Time `json:"nextRetry,omitzero"`
}

// ToolInfo is one of a server's tools as its status lists it.
type ToolInfo struct {
	// Name is the server's own name for the tool; PoolName is what a
	// model calls (see QualifiedName).
	Name        string           `json:"name"`
	PoolName    string           `json:"poolName"`
	Description string           `json:"description,omitempty"`
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are the behaviour hints an agent SDK's status shows.
// Each is nil when the server gave none. They are the server's claims:
// rely on them only for servers marked trusted.
type ToolAnnotations struct {
	ReadOnly    *bool `json:"readOnly,omitempty"`
	Destructive *bool `json:"destructive,omitempty"`
	OpenWorld   *bool `json:"openWorld,omitempty"`
}

// toolInfo renders a pool entry for a status.
func toolInfo(t Tool) ToolInfo {
	info := ToolInfo{Name: t.Definition.Name, PoolName: t.Name, Description: t.Definition.Description}
	if a := t.Definition.Annotations; a != nil && (a.ReadOnlyHint != nil || a.DestructiveHint != nil || a.OpenWorldHint != nil) {
		info.Annotations = &ToolAnnotations{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint}
	}
	return info
}

// setResultJSON is SetResult on the wire: its fields, and Errors as
// messages.
type setResultJSON struct {
	setResultFields
	Errors map[string]string `json:"errors,omitempty"`
}

// setResultFields is SetResult without its methods, so that encoding it
// does not call them again.
type setResultFields SetResult

// MarshalJSON encodes the result with "errors": each rejected server's
// name and its error's message (omitted when none was rejected).
func (r SetResult) MarshalJSON() ([]byte, error) {
	out := setResultJSON{setResultFields: setResultFields(r)}
	if len(r.Errors) > 0 {
		out.Errors = make(map[string]string, len(r.Errors))
		for name, err := range r.Errors {
			msg := "<nil>"
			if err != nil {
				msg = err.Error()
			}
			out.Errors[name] = msg
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote; each error comes back as
// its message (an error of its own, no longer matching the original's
// type).
func (r *SetResult) UnmarshalJSON(b []byte) error {
	var in setResultJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = SetResult(in.setResultFields)
	r.Errors = nil
	if len(in.Errors) > 0 {
		r.Errors = make(map[string]error, len(in.Errors))
		for name, msg := range in.Errors {
			r.Errors[name] = errors.New(msg)
		}
	}
	return nil
}
