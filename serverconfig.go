package mcpvisor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// ServerConfig is one entry of an .mcp.json "mcpServers" map: how to
// reach the server (the embedded transports.Config: type, command, args,
// env, cwd, sandbox, url, headers, tls) and how mcpvisor supervises it.
// The zero value of every member but the transport's means the default.
type ServerConfig struct {
	transports.Config

	// Disabled servers are never started; their tools are not offered.
	Disabled bool `json:"disabled,omitempty"`

	// NeedsApproval, when not empty, holds the server back: it says why
	// the user must approve the entry first (it comes from an untrusted
	// config layer, such as a project's .mcp.json, and this entry was
	// never approved). A held server is never started, not even by a
	// call, Reconnect or Toggle: it stays in StateNeedsApproval, with
	// this reason as its error, until a config without NeedsApproval
	// replaces this one (SetServers). The loader sets it (config.Load)
	// and leaves the entry unexpanded: only Type is meaningful then.
	NeedsApproval string `json:"-"`

	// Lazy servers are not connected at start: they stay pending until
	// first used — a call naming one of their tools (mcp__<server>__…) or
	// prompts, or naming the server (Resources().Read, Server(name).Ping) — or Reconnect.
	// Their tools are unknown to the pool until then.
	Lazy bool `json:"lazy,omitempty"`

	// Defer marks a server whose tools are found by search rather than
	// offered up front: they stay in the pool (Tools, CallTool and
	// SearchTools see them, with Tool.Deferred set), and a gateway leaves
	// them out of tools/list, offering them through its search tools.
	// For servers with many tools a model rarely needs.
	Defer bool `json:"defer,omitempty"`

	// Trust is the server's trust level: TrustTrusted ("trusted": its
	// tool annotations may be relied on, its changed tool definitions are
	// offered), TrustUntrusted ("untrusted": every call needs the host's
	// approval, Options.ApproveCall), TrustSandbox ("sandbox": a stdio
	// server runs confined, as with "sandbox": true), or empty (the
	// default: none of these). Another value is a config error. A project
	// layer cannot raise it above what the user's config says (see
	// config.Load).
	Trust string `json:"trust,omitempty"`

	// Tools filters the tools offered from this server by glob.
	Tools ToolFilter `json:"tools,omitempty"`

	// ConnectTimeoutMs bounds one connect of this server (start,
	// negotiation and listing), in milliseconds. Zero means
	// Options.ConnectTimeout.
	ConnectTimeoutMs int `json:"connectTimeoutMs,omitempty"`

	// TimeoutMs is the default deadline of a call (or any request) to
	// this server, in milliseconds. Zero means Options.CallTimeout for
	// tool calls, Options.RequestTimeout for other requests.
	TimeoutMs int `json:"timeoutMs,omitempty"`

	// Reconnect overrides fields of Options.Reconnect for this server.
	Reconnect ReconnectPolicy `json:"reconnect,omitempty"`

	// PingInterval, when set, pings the server this often while it is
	// ready; overrides Options.PingInterval. A ping that fails at the
	// transport (or gets no answer within 10 s, whatever the interval) is
	// a strike; a server that answers ping with method-not-found is not
	// pinged again.
	PingInterval Duration `json:"pingInterval,omitempty"`

	// ProtocolVersion pins the protocol version. Empty means the newest
	// the server supports.
	ProtocolVersion string `json:"protocolVersion,omitempty"`

	// OAuth holds the server's OAuth settings, an OAuthConfig in JSON
	// (client id, scopes, grant…; see OAuthSettings).
	OAuth json.RawMessage `json:"oauth,omitempty"`

	// EnvFile (VS Code's "envFile") names a file of environment variables
	// for a stdio server, in the .env format. The config loader
	// (config.Load) reads it — relative to the config file's directory —
	// and merges it into Env, under the entry's own env members, leaving
	// here the file's absolute path; the supervisor itself never reads
	// it.
	EnvFile string `json:"envFile,omitempty"`

	// Scope names where the entry came from, for status: the config
	// layer (user, project, local, managed, file, or a host's own layer
	// name). config.Load sets it; a host that builds entries itself may.
	// It never reaches the server, and changing it alone changes nothing
	// but the status.
	Scope string `json:"-"`

	// Nodes pins the server, in cluster mode (ClusterMember), to the
	// members whose labels hold this one label (e.g. {"cmd": "uvx"} for a
	// stdio server, on the members that have its command). Empty: any
	// member. A single supervisor ignores it.
	Nodes map[string]string `json:"nodes,omitempty"`
}

// ToolFilter selects tools by name with glob patterns (path.Match syntax).
// An empty Allow allows everything; Deny wins over Allow.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// ReconnectPolicy says how a server's connection is healed. Zero fields
// mean the defaults (or, in a ServerConfig, Options.Reconnect's).
//
// An episode starts when a connection is lost or a connect fails, and ends
// when a connection has stayed up for StableAfter (or when the server is
// woken by Reconnect or a config change). Within an episode the server
// makes at most MaxAttempts connect attempts: the first at once when the
// connection simply ended (the process exited, the transport closed),
// every other one after an exponential backoff with jitter. When the
// budget is spent the server is parked in StateFailed, where it costs
// nothing until woken. See docs/supervision.md.
type ReconnectPolicy struct {
	// Strikes is how many consecutive transient transport errors on a live
	// connection (reset, refused, a transport timeout, HTTP 5xx) close it
	// for a reconnect. A successful exchange clears them. Default 3.
	Strikes int `json:"strikes,omitempty"`
	// MaxAttempts bounds the connect attempts of one episode. Default 6;
	// a negative value means none: a failure parks the server at once.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// InitialDelay is the first backoff delay; each next one is Multiplier
	// times longer, up to MaxDelay. Defaults 500 ms, 2, 30 s.
	InitialDelay Duration `json:"initialDelay,omitempty"`
	Multiplier   float64  `json:"multiplier,omitempty"`
	MaxDelay     Duration `json:"maxDelay,omitempty"`
	// Jitter randomizes each delay by ±Jitter of itself. Default 0.3; a
	// negative value means none.
	Jitter float64 `json:"jitter,omitempty"`
	// StableAfter is how long a connection must stay up for the episode to
	// end: strikes, attempts and backoff start over. Default 60 s.
	StableAfter Duration `json:"stableAfter,omitempty"`
	// ProbeAfter and ProbeTimeout notice a server that stopped answering:
	// once it owes nothing but a call was given up since it last sent
	// anything (its deadline passed, or its caller cancelled it), and it
	// has sent nothing for ProbeAfter, it gets a ping, and a ping
	// unanswered within ProbeTimeout is a strike (ErrUnresponsive). A
	// server with calls in flight is at work and never probed.
	// Defaults 15 s and 10 s; a negative ProbeAfter turns the probes off.
	ProbeAfter   Duration `json:"probeAfter,omitempty"`
	ProbeTimeout Duration `json:"probeTimeout,omitempty"`
	// ListenDelay and ListenFailures govern the subscriptions/listen
	// stream of a 2026-07-28 server, its only channel for notifications:
	// a dropped stream is reopened after ListenDelay at the least (the
	// wait doubling up to a minute), and ListenFailures drops in a row
	// that were never acknowledged count as a lost connection. Defaults
	// 1 s and 8.
	ListenDelay    Duration `json:"listenDelay,omitempty"`
	ListenFailures int      `json:"listenFailures,omitempty"`
}

// Duration is a time.Duration that reads from JSON either as a Go
// duration string ("500ms", "2m") or as a number of milliseconds, and is
// written as a string.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"2s\" or milliseconds", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// held reports whether the server must not start (see NeedsApproval).
func (c *ServerConfig) held() bool { return c.NeedsApproval != "" }

// startable reports whether the server may ever be started: neither
// disabled nor held for approval.
func (c *ServerConfig) startable() bool { return !c.Disabled && !c.held() }

// Validate reports the first problem that makes the config unusable. A
// held config (NeedsApproval set) is valid: it is never started. A
// disabled one needs no command or URL, for the same reason (its other
// fields are still checked).
func (c *ServerConfig) Validate() error {
	if c.NeedsApproval != "" {
		return nil
	}
	if err := c.Config.Validate(); err != nil && !c.Disabled {
		return err
	}
	if c.EnvFile != "" && c.Kind() != transports.TypeStdio {
		return fmt.Errorf("envFile applies to stdio servers only")
	}
	if c.ProtocolVersion != "" && !protocol.IsSupported(c.ProtocolVersion) {
		return fmt.Errorf("protocolVersion %q is not one mcpvisor speaks (%v)", c.ProtocolVersion, protocol.SupportedVersions())
	}
	if !validTrust(c.Trust) {
		return fmt.Errorf("trust %q: want %q, %q or %q", c.Trust, TrustTrusted, TrustUntrusted, TrustSandbox)
	}
	if c.Trust == TrustSandbox {
		if c.Kind() != transports.TypeStdio {
			return fmt.Errorf("trust %q applies to stdio servers only: a remote server has no process to confine", TrustSandbox)
		}
		if c.Sandbox != nil && !c.Sandbox.Enabled {
			return fmt.Errorf("trust %q with \"sandbox\": false: the server must run confined", TrustSandbox)
		}
	}
	if c.TimeoutMs < 0 {
		return fmt.Errorf("timeoutMs must not be negative")
	}
	if c.ConnectTimeoutMs < 0 {
		return fmt.Errorf("connectTimeoutMs must not be negative")
	}
	if c.PingInterval < 0 {
		return fmt.Errorf("pingInterval must not be negative")
	}
	if err := c.Reconnect.Validate(); err != nil {
		return err
	}
	if _, err := c.OAuthSettings(); err != nil {
		return err
	}
	return nil
}
