package mcpvisor

import (
	"fmt"
	"github.com/mcpvisor/mcpvisor/actors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

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
