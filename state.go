package mcpvisor

import (
	"time"
)

// State is where a server is in its lifecycle; every configured server
// is always in exactly one. ServerStatus.Status maps it to the five
// values of an agent SDK (StatusOf).
type State string

// The server states.
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
	// (HTTP 401/403). Woken like StateFailed, or by a login.
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

// FailureKind is what an error means for supervision (ClassifyFailure):
// whether it makes the connection a strike, ends it, parks the server,
// or concerns one call only.
type FailureKind string

// The failure kinds.
const (
	// FailureNone: no error.
	FailureNone FailureKind = ""
	// FailureTransient: the transport failed in a way that may heal by
	// itself (reset, refused, broken pipe, unexpected EOF, a transport
	// timeout, DNS, HTTP 429/5xx but 501): a strike on a live connection,
	// a retry with backoff for a connect.
	FailureTransient FailureKind = "transient"
	// FailureClosed: the connection ended (the process exited, the
	// transport closed): reconnected at once, then with backoff.
	FailureClosed FailureKind = "closed"
	// FailureSessionExpired: the server forgot the session (HTTP 404 on a
	// known session): a new one is initialized at once.
	FailureSessionExpired FailureKind = "session-expired"
	// FailureAuth: credentials are missing, expired or insufficient: the
	// server is parked in needs-auth.
	FailureAuth FailureKind = "auth"
	// FailureConfig: the config cannot work (command not found, a bad
	// URL, TLS verification, an unsupported transport): parked in failed.
	FailureConfig FailureKind = "config"
	// FailureProtocol: the server does not speak MCP as mcpvisor does:
	// parked in failed.
	FailureProtocol FailureKind = "protocol"
	// FailureCall: one call failed and the connection is fine. Never a
	// strike.
	FailureCall FailureKind = "call"
	// FailureSandbox: the sandbox the config asks for cannot be had here;
	// the server never ran and is parked in failed.
	FailureSandbox FailureKind = "sandbox"
	// FailureResourceLimit: a confined server died at one of its
	// sandbox's limits; it is restarted with backoff.
	FailureResourceLimit FailureKind = "resource-limit"
)

// LatencyStats count a server's requests through the supervisor (calls,
// prompts, resource reads, pings) and how long they took
// (ServerStatus.Latency).
type LatencyStats struct {
	// Calls counts the requests; Errors those that ended in an error
	// (not a tool result with isError, which is an answer).
	Calls  uint64 `json:"calls"`
	Errors uint64 `json:"errors"`
	// P50 and P99 are estimated from the histogram: the upper bound of
	// the bucket holding that rank (zero before the first request).
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	// Sum is the total time of all requests.
	Sum time.Duration `json:"sum"`
	// Counts holds one count per LatencyBuckets bound (requests at most
	// that long and longer than the previous bound), then the overflow.
	Counts []uint64 `json:"buckets"`
}
