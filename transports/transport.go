// Package transports moves framed JSON-RPC messages between mcpvisor and one
// MCP server. It knows processes, sessions, headers and framing, not MCP
// semantics: a frame is an opaque JSON text to it.
//
// The contract every transport implements is Conn (the sending half, and
// the shutdown) plus Receiver (the receiving half, which the layer above
// implements and the transport calls). Receiving by callback, rather than by
// a Read method, lets a transport hand each frame to its waiter from the
// goroutine that read it: there is no hand-off between the read and the
// caller that is waiting for the response.
//
// Implementations live in sub-packages (transports/stdio, streamable,
// sse, ws, inproc). Each registers its kind with Register from an init
// function: a Kind says whether the kind is started from a command or
// reached by URL, which URL schemes it takes, whether it speaks OAuth,
// how its spans are described, and how to dial it. The rest of mcpvisor
// (config checks and policy, the server actor's dial, authorization,
// tracing, the command line) reads that table through Lookup and Kinds
// and lists no kind by hand, so adding a transport is its package plus
// one Register call, and one blank import where the host links its
// transports (the root package's transports_linked.go). A program sees
// only the kinds whose packages it links.
package transports

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Receiver is what a transport delivers to. The session layer implements it.
type Receiver interface {
	// Frame delivers one complete frame. data is valid only until Frame
	// returns; the receiver must copy what it keeps. Frame may be called
	// from several goroutines at once by transports that read several
	// streams (HTTP); a stdio transport calls it from one goroutine, in
	// arrival order.
	Frame(data []byte)

	// FrameError reports a frame the transport dropped without ending the
	// connection, such as one over the size limit (a *FrameTooLargeError).
	FrameError(err error)

	// Closed reports that the connection ended, with the cause. It is
	// called exactly once, after the last Frame and FrameError call.
	Closed(err error)
}

// Conn is one open connection to a server.
type Conn interface {
	// Send writes one frame. It is safe for concurrent use; frames are
	// never interleaved. It returns when the frame is written, when ctx
	// ends (ctx.Err(), wrapped, if nothing was written), or with an error
	// that ends the connection (a frame written in part corrupts the
	// stream, so the connection is closed and ErrClosed is returned).
	Send(ctx context.Context, frame []byte) error

	// Close ends the connection. It is idempotent and safe to call
	// concurrently with Send and with itself. It returns when the
	// connection's resources (for stdio, the process group) are released
	// or ctx ends, whichever is first; in the second case it returns an
	// error saying what may still be running. Receiver.Closed has been
	// called, or is being called, when Close returns.
	Close(ctx context.Context) error
}

// Errors a transport returns. Test with errors.Is.
var (
	// ErrClosed means the connection has ended.
	ErrClosed = errors.New("transport: connection closed")
)

// FrameTooLargeError reports a frame over the configured size limit. The
// frame was discarded; the connection continues. Prefix holds the frame's
// first bytes (up to 4 KiB), enough to recover the JSON-RPC id in most
// cases so that the request it answered can fail at once.
type FrameTooLargeError struct {
	Size   int64 // bytes read before the frame was abandoned (at least Limit+1)
	Limit  int64
	Prefix []byte
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("transport: frame of %d+ bytes exceeds the %d-byte limit", e.Size, e.Limit)
}

// DefaultMaxFrameSize is the frame size limit when a transport's option is
// zero: 16 MiB, as Claude Code and the official Go SDK use.
const DefaultMaxFrameSize = 16 << 20

// Type names a transport kind as the .mcp.json "type" member does.
type Type string

// The names of the transport kinds mcpvisor ships. Each is registered by
// its package (see Register); a name means nothing until its package is
// linked.
const (
	TypeStdio Type = "stdio" // a subprocess speaking newline-delimited JSON
	TypeHTTP  Type = "http"  // Streamable HTTP (both eras)
	TypeSSE   Type = "sse"   // legacy HTTP+SSE (2024-11-05)
	TypeWS    Type = "ws"    // WebSocket, subprotocol "mcp"
	TypeSDK   Type = "sdk"   // an in-process server
)

// Config says how to reach one server: the members of an .mcp.json server
// entry that matter to a transport.
type Config struct {
	// Type is the transport kind. Empty means stdio when Command is set and
	// http when URL is set.
	Type Type `json:"type,omitempty"`

	// Command, Args, Env and Cwd start a stdio server. Env is merged over
	// the host's environment.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`

	// Sandbox confines a stdio server (see Sandbox). Nil leaves it to the
	// defaults of whoever loads the config (a config file's top-level
	// "sandbox"); a Sandbox with Enabled false runs it unconfined.
	Sandbox *Sandbox `json:"sandbox,omitempty"`

	// URL and Headers reach a remote server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// TLS configures the TLS client of an https (or wss) server. Nil
	// means the system's roots and no client certificate.
	TLS *TLSConfig `json:"tls,omitempty"`
}

// TLSConfig is a remote server's TLS client settings.
type TLSConfig struct {
	// CAFile is a PEM file of certificate authorities trusted, in
	// addition to the system's, for this server.
	CAFile string `json:"caFile,omitempty"`

	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that require mutual TLS. Both or neither.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`

	// ServerName overrides the name the server's certificate must carry.
	ServerName string `json:"serverName,omitempty"`

	// InsecureSkipVerify accepts any server certificate. For development
	// only: it makes the connection open to interception.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// Kind returns the effective transport kind.
func (c *Config) Kind() Type {
	switch {
	case c.Type != "":
		return Type(strings.ToLower(string(c.Type)))
	case c.Command != "":
		return TypeStdio
	case c.URL != "":
		return TypeHTTP
	}
	return ""
}

// IsLocal reports whether the server runs on this machine (a registered
// kind that is not remote: stdio or in-process): such servers share the
// host's CPU and are admitted to connect in the local class.
func (c *Config) IsLocal() bool {
	k, ok := Lookup(c.Kind())
	return ok && !k.Remote
}

// Validate reports the first problem that makes the config unusable.
func (c *Config) Validate() error {
	kind := c.Kind()
	if kind == "" {
		return errors.New(`server needs "command" (stdio) or "url" (remote)`)
	}
	k, ok := Lookup(kind)
	if !ok {
		return fmt.Errorf("unknown transport type %q (want %s)", c.Type, KindList(Kinds()))
	}
	switch {
	case k.Command:
		if c.Command == "" {
			return fmt.Errorf(`%s server needs "command"`, k.Type)
		}
		return c.Sandbox.Validate()
	case k.Remote:
		if c.URL == "" {
			return fmt.Errorf(`%s server needs "url"`, k.Type)
		}
	}
	if c.Sandbox != nil && c.Sandbox.Enabled {
		return fmt.Errorf(`%w: "sandbox" confines stdio servers only, and this one is %s`, ErrInvalidSandbox, k.Type)
	}
	return nil
}
