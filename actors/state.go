package actors

import (
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
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
	Tools           int                     `json:"tools"`
	Resources       int                     `json:"resources"`
	Prompts         int                     `json:"prompts"`
	InFlight        int                     `json:"inFlight"`
	LastError       string                  `json:"lastError,omitempty"`
	// LastErrorClass classifies LastError (transports.Class): refused,
	// reset, timeout, dns, tls, auth, session-expired, http-4xx,
	// http-5xx, config, closed, canceled or other.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// LastFailure is what LastError meant for supervision
	// (ClassifyFailure): transient, closed, session-expired, auth,
	// config, protocol or call.
	LastFailure FailureKind `json:"lastFailure,omitempty"`
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
}

// EventType names what an Event reports.
type EventType string

// The event types.
const (
	// EventServerState: a server changed state (State, Previous, Err).
	EventServerState EventType = "server_state"
	// EventToolsChanged: the tool pool changed (Server is the server whose
	// tools changed; Tools is the pool's size after the change).
	EventToolsChanged EventType = "tools_changed"
	// EventGap: the subscriber missed Dropped events because it read too
	// slowly, or its resume cursor was older than the buffer.
	EventGap EventType = "gap"
)

// Event is one entry of the supervisor's event stream. Seq increases by
// one per event for the supervisor's lifetime, so a subscriber can resume
// after the last one it saw.
type Event struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Server string    `json:"server,omitempty"`

	// State, Previous (empty for a server's first event) and Err describe
	// an EventServerState.
	State    State  `json:"state,omitempty"`
	Previous State  `json:"previous,omitempty"`
	Err      string `json:"error,omitempty"`

	Tools int `json:"tools,omitempty"`

	Dropped uint64 `json:"dropped,omitempty"`
}

// Tool is one entry of the tool pool.
type Tool struct {
	// Name is the qualified name a model calls: mcp__<server>__<tool>.
	Name string
	// Server is the configured server name.
	Server string
	// Trusted reports whether the server is marked trusted, so that the
	// annotations may be relied on.
	Trusted bool
	// Definition is the tool as the server lists it (Definition.Name is
	// the server's own name for it).
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
