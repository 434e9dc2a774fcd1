package transports

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Kind describes one transport kind to the rest of mcpvisor: the config
// checks, the dial, the authorization, the tracing, the command line.
// Each transport package registers its one Kind from an init function;
// nothing outside it lists the kinds.
type Kind struct {
	// Type is the kind's name, as the .mcp.json "type" member spells it
	// (lower case).
	Type Type

	// Label is the kind's name for people ("HTTP", "WebSocket"). Empty
	// means Type.
	Label string

	// Command means a server of this kind is started from Config.Command
	// as a process on this machine.
	Command bool

	// Remote means a server of this kind is reached at Config.URL, over
	// the network.
	Remote bool

	// Schemes are the URL schemes a Remote kind accepts, lower case.
	Schemes []string

	// HTTPSchemes maps each of Schemes that is not an HTTP scheme to the
	// HTTP scheme of the same resource (ws → http): the URL the server's
	// OAuth metadata describes. Nil when every scheme is http or https.
	HTTPSchemes map[string]string

	// Authenticates means the kind speaks OAuth to its server: a bearer
	// token on its requests, discovery and login when the server asks.
	Authenticates bool

	// NetworkTransport is the OpenTelemetry network.transport of the
	// kind's spans ("tcp", "pipe"); empty sets none. Remote kinds' spans
	// also carry server.address and server.port from the URL.
	NetworkTransport string

	// Dial binds a server's config to the host's options. It must not be
	// nil.
	Dial Dialer
}

// Name is the kind's label, or its Type when it has none.
func (k Kind) Name() string {
	if k.Label != "" {
		return k.Label
	}
	return string(k.Type)
}

// Dialer binds one server's config and the host's dial options into a
// Dial, or reports at once why the server cannot be dialed (a
// *ConfigError, for instance, when an option the kind needs is missing).
// It must not block.
type Dialer func(cfg Config, opts DialOptions) (Dial, error)

// Dial opens one connection, delivering to r. Each call opens a new
// connection (reconnects call it again).
type Dial func(ctx context.Context, r Receiver) (Conn, error)

// DialOptions are the host's settings every transport is dialed with.
// Each kind reads the fields that concern it; the zero value of each field
// is the transport's default.
type DialOptions struct {
	// Logger receives the transport's diagnostics. The zero value logs
	// nothing.
	Logger zerolog.Logger

	// MaxFrameSize caps one frame. Zero means DefaultMaxFrameSize.
	MaxFrameSize int64

	// UserAgent is sent by HTTP kinds unless the config's headers set one.
	UserAgent string

	// HTTPClient sends the requests of HTTP kinds. Nil means one built
	// from the server's config (its TLS settings).
	HTTPClient *http.Client

	// CloseStdinTimeout and TerminateTimeout bound the stages of closing a
	// local process (close its stdin, then SIGTERM, then SIGKILL).
	CloseStdinTimeout time.Duration
	TerminateTimeout  time.Duration

	// Extras holds options that only one kind understands, each a value
	// of a type that kind's package declares (the stdio transport's
	// sandbox settings, the in-process server to connect to). A kind
	// finds its own with Extra; values no kind asks for are ignored.
	Extras []any
}

// Extra returns the first value of o.Extras of type T.
func Extra[T any](o DialOptions) (T, bool) {
	for _, v := range o.Extras {
		if t, ok := v.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// The table of kinds. Written by Register (from init functions, so before
// main in practice), read by Lookup, Kinds and HTTPScheme from any
// goroutine; the mutex makes a later Register safe too.
var kinds struct {
	mu sync.RWMutex
	m  map[Type]Kind
}

// Register adds a transport kind to the table. A transport package calls
// it once, from init. It panics when k has no Type or no Dial, or when
// its Type is already registered: these are programmer errors.
func Register(k Kind) {
	if k.Type == "" || k.Type != Type(strings.ToLower(string(k.Type))) {
		panic(fmt.Sprintf("transports: Register: kind %q must be a non-empty lower-case name", k.Type))
	}
	if k.Dial == nil {
		panic(fmt.Sprintf("transports: Register: kind %q has no Dial", k.Type))
	}
	if k.Remote && len(k.Schemes) == 0 {
		panic(fmt.Sprintf("transports: Register: remote kind %q accepts no URL scheme", k.Type))
	}
	k.Schemes = slices.Clone(k.Schemes)
	k.HTTPSchemes = maps.Clone(k.HTTPSchemes)
	kinds.mu.Lock()
	defer kinds.mu.Unlock()
	if _, dup := kinds.m[k.Type]; dup {
		panic(fmt.Sprintf("transports: Register: kind %q registered twice", k.Type))
	}
	if kinds.m == nil {
		kinds.m = make(map[Type]Kind)
	}
	kinds.m[k.Type] = k
}

// Lookup returns the registered kind named t (in any case). It is safe
// for concurrent use; the Kind's slices and map are shared and must not
// be modified.
func Lookup(t Type) (Kind, bool) {
	kinds.mu.RLock()
	defer kinds.mu.RUnlock()
	k, ok := kinds.m[Type(strings.ToLower(string(t)))]
	return k, ok
}

// Kinds returns the registered kinds: those started from a command first,
// then the remote ones, then the others, each group by Type (the order of
// "stdio, http, sse, ws or sdk"). Like Lookup's, the kinds are shared.
func Kinds() []Kind {
	kinds.mu.RLock()
	out := make([]Kind, 0, len(kinds.m))
	for _, k := range kinds.m {
		out = append(out, k)
	}
	kinds.mu.RUnlock()
	group := func(k Kind) int {
		switch {
		case k.Command:
			return 0
		case k.Remote:
			return 1
		}
		return 2
	}
	slices.SortFunc(out, func(a, b Kind) int {
		if g := group(a) - group(b); g != 0 {
			return g
		}
		return strings.Compare(string(a.Type), string(b.Type))
	})
	return out
}

// HTTPScheme returns the HTTP scheme of a URL scheme some registered kind
// accepts (ws → http, wss → https), or scheme itself.
func HTTPScheme(scheme string) string {
	kinds.mu.RLock()
	defer kinds.mu.RUnlock()
	for _, k := range kinds.m {
		if h, ok := k.HTTPSchemes[scheme]; ok {
			return h
		}
	}
	return scheme
}

// KindList is the names of the kinds ks, in their order, for a message:
// "stdio, http or ws".
func KindList(ks []Kind) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = string(k.Type)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// DefaultPort returns the port a URL of scheme means when it names none:
// that of its HTTP scheme (see HTTPScheme), "80" or "443"; "" for a scheme
// that is not HTTP's nor mapped to it.
func DefaultPort(scheme string) string {
	switch HTTPScheme(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}
