package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// ServerConfig is one entry of an .mcp.json "mcpServers" map: how to reach
// the server (the embedded transports.Config) and how to supervise it.
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
	// replaces this one (SetServers). The loader sets it (LoadConfig)
	// and leaves the entry unexpanded: only Type is meaningful then.
	NeedsApproval string `json:"-"`

	// Lazy servers are not connected at start: they stay pending until
	// first used — a call naming one of their tools (mcp__<server>__…) or
	// prompts, or naming the server (ReadResource, Ping) — or Reconnect.
	// Their tools are unknown to the pool until then.
	Lazy bool `json:"lazy,omitempty"`

	// Trust is the server's trust level: "trusted" (its tool annotations
	// may be relied on, its changed tools are offered), "untrusted"
	// (every call needs Options.ApproveCall's approval), "sandbox" (a
	// stdio server runs confined, as with "sandbox": true), or empty (the
	// default: none of these).
	Trust string `json:"trust,omitempty"`

	// Tools filters the tools offered from this server by glob.
	Tools ToolFilter `json:"tools,omitempty"`

	// ConnectTimeoutMs bounds one connect of this server (start,
	// negotiation and listing), in milliseconds. Zero means
	// Options.ConnectTimeout.
	ConnectTimeoutMs int `json:"connectTimeoutMs,omitempty"`

	// TimeoutMs is the default deadline of a call to this server, in
	// milliseconds. Zero means Options.CallTimeout.
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
	// (mcpvisor.LoadConfig) reads it — relative to the config file's
	// directory — and merges it into Env, under the entry's own env
	// members, leaving here the file's absolute path; the supervisor
	// itself never reads it.
	EnvFile string `json:"envFile,omitempty"`

	// Scope names where the entry came from, for status: the config
	// layer (user, project, local, managed, or a host's own layer name).
	// The loader sets it (LoadConfig); a host that builds entries itself
	// may set it. It never reaches the server, and changing it alone
	// changes nothing but the status.
	Scope string `json:"-"`
}

// held reports whether the server must not start (see NeedsApproval).
func (c *ServerConfig) held() bool { return c.NeedsApproval != "" }

// startable reports whether the server may ever be started: neither
// disabled nor held for approval.
func (c *ServerConfig) startable() bool { return !c.Disabled && !c.held() }

// ToolFilter selects tools by name with glob patterns (path.Match syntax).
// An empty Allow allows everything; Deny wins over Allow.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

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
	if !ValidTrust(c.Trust) {
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

// Options configure the supervision core. The zero value is usable.
type Options struct {
	// Logger receives everything mcpvisor logs, protoactor's own logging
	// included. The zero value logs nothing. mcpvisor never writes to
	// stdout.
	Logger zerolog.Logger

	// ClientInfo names the host to servers. Default: mcpvisor and its
	// version.
	ClientInfo protocol.Implementation

	// Capabilities are the client capabilities declared to every server,
	// besides those of the handlers below (which declare their own).
	// Declare only what Requests answers.
	Capabilities protocol.ClientCapabilities

	// Roots are the roots answered to roots/list. Not nil (even empty)
	// declares the roots capability (with listChanged); SetRoots changes
	// them later and tells the servers.
	Roots []protocol.Root

	// Sampling answers sampling/createMessage; setting it declares the
	// sampling capability.
	Sampling SamplingHandler

	// Elicitation answers elicitation/create; setting it declares the
	// elicitation capability (form mode, and URL mode when
	// ElicitationURL is set).
	Elicitation    ElicitationHandler
	ElicitationURL bool

	// ServerRequestTimeout bounds the answer to one server-to-client
	// request (the host's handler included). Zero means 2 minutes.
	ServerRequestTimeout time.Duration

	// Requests answers the requests servers send to the host
	// (elicitation/create, sampling/createMessage, roots/list). It runs in
	// a goroutine of its own per request, with a context that ends when
	// the connection does; it returns the result to send, or an error (a
	// *protocol.Error is sent as is). Nil answers them method-not-found.
	Requests func(ctx context.Context, server, method string, params json.RawMessage) (any, error)

	// Inputs resolves, as a whole, each round of input a 2026-07-28
	// server asks for by answering tools/call, prompts/get or
	// resources/read with an InputRequiredResult (multi round-trip
	// requests, SEP-2322): method is that request, reqs what the server
	// asks, by key. It runs on the goroutine of the call, with a context
	// derived from the call's (its values included) that ends after
	// ServerRequestTimeout, and returns an answer per key (a key left out
	// is sent back unanswered, and the server usually asks again). The
	// request is then retried with the answers; the caller sees only its
	// final result. Nil answers each input request like the server
	// request it replaces: through Roots, Sampling, Elicitation or
	// Requests.
	Inputs func(ctx context.Context, server, method string, reqs protocol.InputRequests) (protocol.InputResponses, error)

	// InProcess holds the Go MCP servers living in the host's process, by
	// server name: a config entry of type "sdk" connects to the one
	// registered under its name (see transports/inproc).
	InProcess map[string]inproc.Server

	// LocalConnectLimit is how many local (stdio, in-process) servers may
	// connect at once. Zero means 3. (The library reads no environment
	// variable: the mcpvisor command sets it from
	// $MCP_SERVER_CONNECTION_BATCH_SIZE.)
	LocalConnectLimit int

	// RemoteConnectLimit is how many remote servers may connect at once.
	// Zero means 20 (the mcpvisor command sets it from
	// $MCP_REMOTE_SERVER_CONNECTION_BATCH_SIZE).
	RemoteConnectLimit int

	// ConnectTimeout bounds one connect: start, negotiation and listing
	// (ServerConfig.ConnectTimeoutMs overrides it per server). Zero means
	// 30 s (the mcpvisor command sets it from $MCP_TIMEOUT, milliseconds).
	ConnectTimeout time.Duration

	// CallTimeout is the default deadline of a call whose context has none
	// and whose server sets no timeoutMs. Zero means 2 minutes
	// (the mcpvisor command sets it from $MCP_TOOL_TIMEOUT, milliseconds).
	CallTimeout time.Duration

	// Builtins are the host's own tools, offered first in the pool (sorted
	// by name) and routed by CallTool like MCP tools. On a name collision a
	// built-in keeps its name and the MCP tool is renamed. Names must be
	// unique and non-empty.
	Builtins []BuiltinTool

	// MaxDescriptionLength caps the description of every MCP tool and
	// prompt in the pool, in bytes (cut on a character boundary, ending in
	// "…"): hosts pay for every token they send a model. Zero means 2048;
	// negative means no cap.
	MaxDescriptionLength int

	// DiscoverTimeout bounds the server/discover probe of a server whose
	// era is not yet known: the wait for its answer once the request is
	// sent (an authorization it starts is not counted). Zero means 3 s.
	DiscoverTimeout time.Duration

	// Reconnect is the reconnect policy of every server (see
	// ReconnectPolicy; zero fields mean the defaults).
	Reconnect ReconnectPolicy

	// PingInterval, when positive, pings every ready server this often
	// (ServerConfig.PingInterval overrides it). Zero means no pings: a
	// silent server is healthy until a call says otherwise.
	PingInterval time.Duration

	// FailFast makes a call to a server that is reconnecting fail at once
	// with a *NotReadyError. By default such a call waits for the server
	// to be ready again, up to the call's deadline.
	FailFast bool

	// ReplayIdempotent resends, once, a tool call whose connection was
	// lost before it was answered, after the server is ready again — only
	// for servers marked trust: "trusted", and only for tools whose
	// annotations say both readOnlyHint and idempotentHint. Otherwise a
	// call is never sent twice.
	ReplayIdempotent bool

	// Permissions are the rules checked before every call of a server's
	// tool (see permissions.go: deny beats ask beats allow, then the
	// server's trust level); SetPermissions replaces them. The zero value
	// has none: every call goes ahead, except those of untrusted servers.
	Permissions PermissionRules

	// ApproveCall is asked before a call that needs approval (an ask
	// rule, or a server whose trust is "untrusted"): true lets it go,
	// false refuses it (ErrCallDenied), an error refuses it
	// (ErrApprovalUnavailable). It runs on the caller's goroutine with
	// the call's context. Nil refuses every such call.
	ApproveCall func(ctx context.Context, req CallApproval) (bool, error)

	// MaxFrameSize caps one frame from a server. Zero means 16 MiB.
	MaxFrameSize int64

	// CloseStdinTimeout and TerminateTimeout are the stdio shutdown
	// ladder's waits (close stdin → wait → SIGTERM → wait → SIGKILL).
	// Zero means 2 s each.
	CloseStdinTimeout time.Duration
	TerminateTimeout  time.Duration

	// Sandbox holds the host's settings for the servers whose config asks
	// for a sandbox: the home directory they may not read (default: the
	// user's, from the password database), mechanisms never to use.
	Sandbox sandbox.Options

	// sharedHTTP is the HTTP client of the remote servers without TLS
	// settings of their own, shared so that idle servers cost one
	// connection each, not a client and its pool each. Set by Start.
	sharedHTTP *http.Client

	// admission is the connect scheduler the registry and the server
	// actors' connect goroutines share (see admissionGate). Set by Start.
	admission *admissionGate

	// sessionEnds bounds the Streamable HTTP sessions' closing DELETEs in
	// flight to each host, so that closing many servers of one host
	// reuses sharedHTTP's idle connections. Set by Start.
	sessionEnds *streamable.EndLimiter

	// dispatch runs the actors' mailboxes and the server actors'
	// goroutines on goroutines kept warm (see warmDispatcher). Set by
	// Start; nil runs each on a goroutine of its own.
	dispatch *warmDispatcher

	// EventBuffer is how many past events are kept for subscribers that
	// resume from a sequence number. Zero means 1024.
	EventBuffer int

	// PermissionTimeout is how long a permission request of the channel
	// relay waits for an answer before it expires. Zero means 5 minutes.
	PermissionTimeout time.Duration

	// host is the state shared with the server actors outside any actor
	// (channel hub, permission relay, roots, subscriptions). Set by Start.
	host *hostState

	// tracer makes the spans (newTracer of TracerProvider); nil traces
	// nothing. Set by Start.
	tracer trace.Tracer

	// OAuth configures the authorization of remote servers (see
	// OAuthOptions; the zero value keeps tokens in memory and parks a
	// server that needs a login in needs-auth).
	OAuth OAuthOptions

	// DiscoveryCache keeps the tools of lazy servers across runs (see
	// DiscoveryCache; *toolcache.Cache on disk): a lazy server whose
	// config is unchanged since it last connected has its tools offered
	// from the cache before its first use, and the first call wakes it.
	// Nil: a lazy server's tools are unknown until its first use.
	DiscoveryCache DiscoveryCache

	// ToolPins pins tool definitions (see PinOptions): with a Store, each
	// tool's definition is recorded when its server is first seen, and a
	// later change of it, or a new tool, is withheld from the pool (or
	// offered, per PinOptions) and reported by an
	// EventToolDefinitionChanged until the user approves it. Pins are
	// checked when a server's tool list arrives (connect, list_changed,
	// RecheckToolPins), never per call. The zero value pins nothing.
	ToolPins PinOptions

	// TracerProvider, when not nil, traces every request mcpvisor sends to
	// a server (one client span each, its context in the request's
	// params._meta as W3C traceparent, tracestate and baggage; SEP-414)
	// and every connect and reconnect (a span with the attempt number),
	// following the OpenTelemetry semantic conventions for MCP. A
	// request's span is a child of the span in the caller's context. Nil
	// traces nothing and costs nothing measurable (see
	// docs/observability.md).
	TracerProvider trace.TracerProvider
}

// The defaults of Options' zero fields. The library reads no environment
// variable; the mcpvisor command maps $MCP_TIMEOUT and friends onto
// Options (cmd/mcpvisor/envoptions.go).
const (
	defaultLocalConnectLimit  = 3
	defaultRemoteConnectLimit = 20
	defaultConnectTimeout     = 30 * time.Second
	defaultCallTimeout        = 2 * time.Minute
)

// withDefaults fills zero fields.
func (o Options) withDefaults() Options {
	if o.ClientInfo.Name == "" {
		o.ClientInfo = protocol.Implementation{Name: "mcpvisor", Version: Version}
	}
	if o.LocalConnectLimit <= 0 {
		o.LocalConnectLimit = defaultLocalConnectLimit
	}
	if o.RemoteConnectLimit <= 0 {
		o.RemoteConnectLimit = defaultRemoteConnectLimit
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = defaultConnectTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = defaultCallTimeout
	}
	if o.MaxDescriptionLength == 0 {
		o.MaxDescriptionLength = 2048
	}
	o.Reconnect = o.Reconnect.over(defaultPolicy)
	if o.EventBuffer <= 0 {
		o.EventBuffer = 1024
	}
	if o.ServerRequestTimeout <= 0 {
		o.ServerRequestTimeout = defaultServerRequestTimeout
	}
	return o
}

// validate reports options Start cannot run with.
func (o *Options) validate() error {
	if err := o.Permissions.Validate(); err != nil {
		return fmt.Errorf("mcpvisor: %w", err)
	}
	seen := map[string]bool{}
	for i, b := range o.Builtins {
		switch name := b.Definition.Name; {
		case name == "":
			return fmt.Errorf("mcpvisor: built-in tool %d has no name", i)
		case seen[name]:
			return fmt.Errorf("mcpvisor: built-in tool %q is given twice", name)
		default:
			seen[name] = true
		}
	}
	return nil
}

// BuiltinTool is a tool the host implements itself, offered in the pool
// next to the MCP tools so that a host builds its model's tool list, and
// routes its model's calls, in one place.
type BuiltinTool struct {
	// Definition is what the model sees: name, description, input schema.
	Definition protocol.Tool
	// Call runs the tool. Nil means the host runs it itself: CallTool
	// then fails with ErrHostTool.
	Call func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error)
}

// Version is mcpvisor's version, sent as clientInfo.version.
const Version = "0.1.0"
