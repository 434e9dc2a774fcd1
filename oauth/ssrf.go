package oauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Guarding the authorization traffic against server-side request forgery.
//
// Every URL of the authorization traffic comes from the network: the
// protected resource metadata names the authorization servers, their
// metadata names the token and registration endpoints, a challenge names
// the metadata document. A server on the internet could point mcpvisor at
// the cloud metadata service (169.254.169.254), a router's admin page, or
// a service on the user's own machine. So, unless the MCP server is itself
// on a private network, the client of that traffic connects only to
// public addresses, and it checks the address it connects to, after
// resolution (a name that resolves to 127.0.0.1 is refused like 127.0.0.1
// itself, and the address checked is the address dialled: a second
// lookup cannot rebind it).

// ErrForbiddenAddress: the authorization traffic of an MCP server on a
// public address was about to go to a private, loopback, link-local or
// otherwise internal address. Errors match it with errors.Is and are
// *AddressError.
var ErrForbiddenAddress = errors.New("oauth: refusing an internal address for the authorization traffic of a public MCP server")

// AddressError reports a connection the guard refused.
type AddressError struct {
	// Host is the host asked for (a name or an address).
	Host string
	// Addrs are the addresses it resolved to, none of them allowed.
	Addrs []netip.Addr
}

func (e *AddressError) Error() string {
	addrs := make([]string, len(e.Addrs))
	for i, a := range e.Addrs {
		addrs[i] = a.String()
	}
	return fmt.Sprintf("%v: %s (%s)", ErrForbiddenAddress, e.Host, strings.Join(addrs, ", "))
}

// Is makes an AddressError match ErrForbiddenAddress.
func (e *AddressError) Is(target error) bool { return target == ErrForbiddenAddress }

// Resolver looks up the addresses of a host; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ContextDialer opens connections; *net.Dialer is one.
type ContextDialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// GuardOptions configure NewGuardedClient. The zero value resolves with
// net.DefaultResolver, dials with a 10 s timeout, takes the proxy from
// the environment, verifies TLS with the system roots and bounds each
// request to 30 s.
type GuardOptions struct {
	// Resolver resolves host names. Nil: net.DefaultResolver.
	Resolver Resolver
	// Dialer connects to the addresses the guard allowed (never to a
	// name). Nil: a net.Dialer with a 10 s timeout.
	Dialer ContextDialer
	// TLS is the TLS configuration (custom roots, client certificates).
	// Nil: the defaults.
	TLS *tls.Config
	// Proxy picks the proxy of a request. Nil: http.ProxyFromEnvironment.
	// A proxied request's target is resolved and checked before it is
	// sent (the proxy itself, which the user chose, is not checked; it
	// resolves the name again, so the check is only as good as the
	// proxy's resolution agreeing).
	Proxy func(*http.Request) (*url.URL, error)
	// Timeout bounds one request. Zero: 30 s.
	Timeout time.Duration
	// AllowInternal turns the guard off: every address is allowed.
	AllowInternal bool
}

// NewGuardedClient returns the HTTP client for the authorization traffic
// (discovery, registration, token requests) of the MCP server at
// serverURL. When that server is on a public address it refuses, with an
// *AddressError, to connect to an internal one: loopback, private
// (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16,
// fe80::/10), shared (100.64/10), unspecified, multicast or otherwise not
// global unicast. When the MCP server is itself on such an address (or
// its name resolves to one), everything is allowed: its authorization
// server is likely a neighbour. Redirects are checked like any request.
func NewGuardedClient(serverURL string, o GuardOptions) (*http.Client, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("oauth: server URL %q: no host", serverURL)
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	if o.Proxy == nil {
		o.Proxy = http.ProxyFromEnvironment
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	g := &guard{serverHost: u.Hostname(), o: o}
	tr := &http.Transport{
		Proxy:                 o.Proxy,
		DialContext:           g.dial,
		TLSClientConfig:       o.TLS,
		TLSHandshakeTimeout:   10 * time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: &guardTransport{g: g, base: tr}, Timeout: o.Timeout}, nil
}

// guard decides which addresses the authorization traffic may reach.
//
// Concurrency: safe for concurrent use; mu guards the server's
// classification, decided once (a failed lookup is tried again).
type guard struct {
	serverHost string
	o          GuardOptions

	mu       sync.Mutex
	decided  bool
	internal bool // the MCP server is on an internal address
}

// proxiedKey marks the context of a request that goes through a proxy:
// its connection is to the proxy, whose address is not checked.
type proxiedKey struct{}

// guardTransport checks proxied requests' targets, then sends.
type guardTransport struct {
	g    *guard
	base *http.Transport
}

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if proxy, err := t.base.Proxy(req); err == nil && proxy != nil && !t.g.o.AllowInternal {
		if _, err := t.g.allowed(req.Context(), req.URL.Hostname()); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		req = req.WithContext(context.WithValue(req.Context(), proxiedKey{}, true))
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the transport.
func (t *guardTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// dial connects to one of the allowed addresses of addr's host.
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.o.AllowInternal || ctx.Value(proxiedKey{}) != nil {
		return g.o.Dialer.DialContext(ctx, network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.allowed(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		c, err := g.o.Dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// allowed resolves host and returns the addresses the traffic may reach,
// or an *AddressError when there are none.
func (g *guard) allowed(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var public []netip.Addr
	for _, a := range addrs {
		if !Internal(a) {
			public = append(public, a)
		}
	}
	if len(public) > 0 {
		return public, nil
	}
	internal, err := g.serverInternal(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (and the MCP server's own address is unknown: %w)", &AddressError{Host: host, Addrs: addrs}, err)
	}
	if internal {
		return addrs, nil
	}
	return nil, &AddressError{Host: host, Addrs: addrs}
}

// serverInternal reports whether the MCP server is on an internal
// address (any of its name's addresses).
func (g *guard) serverInternal(ctx context.Context) (bool, error) {
	g.mu.Lock()
	if g.decided {
		defer g.mu.Unlock()
		return g.internal, nil
	}
	g.mu.Unlock()
	addrs, err := g.lookup(ctx, g.serverHost)
	if err != nil {
		return false, err
	}
	internal := false
	for _, a := range addrs {
		internal = internal || Internal(a)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decided, g.internal = true, internal
	return internal, nil
}

// lookup returns host's addresses: host itself when it is an address.
func (g *guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := g.o.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("oauth: resolving %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("oauth: resolving %s: no address", host)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, nil
}

// sharedAddressSpace is 100.64.0.0/10 (RFC 6598, carrier-grade NAT;
// some clouds serve their metadata there).
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// Internal reports whether a is an address the authorization traffic of
// a public MCP server must not reach: anything but a global unicast
// address, and the private, shared and link-local ranges.
func Internal(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		sharedAddressSpace.Contains(a) || a.Zone() != ""
}
