package mcpvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/mcpvisor/mcpvisor/oauth"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// Options configure a Supervisor (Start copies them). The zero value is
// usable: servers
// connect 3 local and 20 remote at a time, a connect may take 30 s, a
// tool call about 28 hours (CallTimeout) and another request 2 minutes,
// and nothing is logged.
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
	// declares the roots capability (with listChanged); Roots().Set changes
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
	// (elicitation/create, sampling/createMessage, roots/list) that no
	// handler above answers. It runs in a goroutine of its own per
	// request, with a context that ends when the connection does; it
	// returns the result to send, or an error (a *protocol.Error is sent
	// as is). Nil answers them method-not-found.
	Requests func(ctx context.Context, server, method string, params json.RawMessage) (any, error)

	// Inputs resolves, as a whole, each round of input a 2026-07-28
	// server asks for by answering tools/call, prompts/get or
	// resources/read with an InputRequiredResult (multi round-trip
	// requests, SEP-2322): method is that request, reqs what the server
	// asks, by key. It runs on the goroutine of the call, with a context
	// derived from the call's that ends after ServerRequestTimeout, and
	// returns an answer per key. The request is then retried with the
	// answers; the caller sees only its final result. Nil answers each
	// input request like the server request it replaces: through Roots,
	// Sampling, Elicitation or Requests.
	Inputs func(ctx context.Context, server, method string, reqs protocol.InputRequests) (protocol.InputResponses, error)

	// InProcess holds the Go MCP servers living in the host's process, by
	// server name: a config entry of type "sdk" connects to the one
	// registered under its name (see transports/inproc).
	InProcess map[string]inproc.Server

	// LocalConnectLimit is how many local (stdio, in-process) servers may
	// connect at once. Zero means $MCP_SERVER_CONNECTION_BATCH_SIZE, else 3.
	LocalConnectLimit int

	// RemoteConnectLimit is how many remote servers may connect at once.
	// Zero means $MCP_REMOTE_SERVER_CONNECTION_BATCH_SIZE, else 20.
	RemoteConnectLimit int

	// ConnectTimeout bounds one connect: start, negotiation and listing
	// (ServerConfig.ConnectTimeoutMs overrides it per server). Zero means
	// $MCP_TIMEOUT (milliseconds), else 30 s.
	ConnectTimeout time.Duration

	// CallTimeout is the default deadline of a tool call whose context
	// has none and whose server sets no timeoutMs. Zero means
	// 100,000,000 ms (about 27.8 hours, Claude Code's MCP_TOOL_TIMEOUT
	// default; the mcpvisor command reads $MCP_TOOL_TIMEOUT): the host's
	// own deadline or cancellation ends a call, and a hung server is
	// found by the liveness probes. Progress reports of a call that asked
	// for them move this default deadline (docs/supervision.md).
	CallTimeout time.Duration

	// RequestTimeout is the default deadline of every other request to a
	// server (lists, reads, prompts) whose context has none and whose
	// server sets no timeoutMs. Zero means 2 minutes.
	RequestTimeout time.Duration

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
	// sent. Zero means 3 s.
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
	// tool: deny beats ask beats allow, then the server's trust level
	// (see PermissionRules and docs/trust.md). SetPermissions replaces
	// them. The zero value has none: every call goes ahead, except those
	// of servers whose Trust is TrustUntrusted.
	Permissions PermissionRules

	// ApproveCall is asked before each call that needs approval (an Ask
	// rule matched, or the server's Trust is TrustUntrusted): true lets
	// it go, false refuses it (ErrCallDenied), an error refuses it
	// (ErrApprovalUnavailable). It runs on the caller's goroutine, with
	// the call's context (the gateway's asks the calling client by
	// elicitation). Nil refuses every such call.
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

	// EventBuffer is how many past events are kept for subscribers that
	// resume from a sequence number. Zero means 1024.
	EventBuffer int

	// PermissionTimeout is how long a permission request of the channel
	// relay waits for an answer before it expires. Zero means 5 minutes.
	PermissionTimeout time.Duration

	// OAuth configures the authorization of remote servers (see
	// OAuthOptions; the zero value keeps tokens in memory and parks a
	// server that needs a login in needs-auth).
	OAuth OAuthOptions

	// DiscoveryCache keeps the tools of lazy servers across runs
	// (*toolcache.Cache on disk): a lazy server whose config is unchanged
	// since it last connected has its tools offered from the cache before
	// its first use, and the first call wakes it. Nil: a lazy server's
	// tools are unknown until its first use.
	DiscoveryCache DiscoveryCache

	// ToolPins pins tool definitions (see PinOptions): with a Store, each
	// tool's definition is recorded when its server is first seen, and a
	// later change of it, or a new tool, is withheld from the pool (or
	// offered, per PinOptions) and reported by an
	// EventToolDefinitionChanged until the user approves it. The zero
	// value pins nothing.
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

// BuiltinTool is a tool the host implements itself, offered in the pool
// before the MCP tools so that a host builds its model's tool list, and
// routes its model's calls, in one place.
//
// Concurrency: Call runs on the goroutine of each CallTool, so several
// calls of one built-in may run at once.
type BuiltinTool struct {
	// Definition is what the model sees: name, description, input schema.
	Definition protocol.Tool
	// Call runs the tool. Nil means the host runs it itself: CallTool
	// then fails with ErrHostTool.
	Call func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error)
}

// DiscoveryCache keeps what servers listed, across runs (Options.
// DiscoveryCache); *toolcache.Cache implements it on disk.
//
// Concurrency: its methods are called from many goroutines at once (each
// server's own), never from an actor's mailbox; they may do file I/O.
type DiscoveryCache interface {
	// Load returns the tools server listed under config hash configHash
	// (ConfigHash), if they were stored; an entry of another config is
	// no entry.
	Load(server, configHash string) (tools []protocol.Tool, savedAt time.Time, ok bool, err error)
	// Store replaces server's entry.
	Store(server, configHash string, tools []protocol.Tool) error
}

// runOptions are the Options a Supervisor runs with (defaults filled in
// by Start), and what Start builds for the actors to share.
//
// Concurrency: set by Start before the first actor is spawned, then
// read-only; every actor and caller goroutine reads it.
type runOptions struct {
	Options

	// sharedHTTP is the HTTP client of the remote servers without TLS
	// settings of their own, shared so that idle servers cost one
	// connection each, not a client and its pool each.
	sharedHTTP *http.Client

	// admission is the connect scheduler the registry and the server
	// actors' connect goroutines share (see admissionGate).
	admission *admissionGate

	// sessionEnds bounds the Streamable HTTP sessions' closing DELETEs in
	// flight to each host, so that closing many servers of one host
	// reuses sharedHTTP's idle connections.
	sessionEnds *streamable.EndLimiter

	// dispatch runs the actors' mailboxes and the server actors'
	// goroutines on goroutines kept warm (actors.Dispatcher); nil runs
	// each on a goroutine of its own.
	dispatch *actors.Dispatcher

	// host is the state shared with the server actors outside any actor
	// (channel hub, permission relay, roots, subscriptions).
	host *hostState

	// tracer makes the spans (newTracer of TracerProvider); nil traces
	// nothing.
	tracer trace.Tracer

	// userStore keeps the principals' upstream credentials (per-user
	// servers, usersessions.go): OAuth.Store, else one memory store for
	// the supervisor's life.
	userStore oauth.Store
}

// The defaults of Options' zero fields. The library reads no environment
// variable; the mcpvisor command maps $MCP_TIMEOUT and friends onto
// Options (cmd/mcpvisor/envoptions.go).
const (
	defaultLocalConnectLimit  = 3
	defaultRemoteConnectLimit = 20
	defaultConnectTimeout     = 30 * time.Second
	defaultCallTimeout        = 100_000_000 * time.Millisecond // Claude Code's MCP_TOOL_TIMEOUT default
	defaultRequestTimeout     = 2 * time.Minute
)

// withDefaults fills zero fields.
func (o Options) withDefaults() Options {
	if o.ClientInfo.Name == "" {
		o.ClientInfo = protocol.Implementation{Name: "mcpvisor", Version: clientVersion}
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
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultRequestTimeout
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

// clientVersion is mcpvisor's version, sent as clientInfo.version.
const clientVersion = "0.1.0"
