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
// resolution (a name that resolves to 127.0.0.1, even beside a public
// address, is refused like 127.0.0.1 itself, and the address checked is
// the address dialled: a second lookup cannot rebind it).

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
// global unicast, and the IPv6 forms that carry such an IPv4 address
// (see Internal). A host name is resolved once per connection and refused
// when any of its addresses is internal; the connection dials the checked
// addresses, never the name. When the MCP server is itself on such an
// address (every address of its name is one), everything is allowed: its
// authorization server is likely a neighbour. Redirects are checked like
// any request.
func NewGuardedClient(serverURL string, o GuardOptions) (*http.Client, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Hostname() == "" {
		return nil, errors.New("oauth: the server URL has no host")
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

// allowed resolves host once and returns its addresses, every one of
// them checked: when any of them is internal (and the MCP server is not
// itself internal) it returns an *AddressError naming them instead. A name
// with a public and an internal address is refused whole, not trimmed to
// its public addresses: a resolver under an attacker's control answers
// what it likes, and the caller dials only what this returned.
func (g *guard) allowed(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var internal []netip.Addr
	for _, a := range addrs {
		if Internal(a) {
			internal = append(internal, a)
		}
	}
	if len(internal) == 0 {
		return addrs, nil
	}
	serverInternal, err := g.serverInternal(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (and the MCP server's own address is unknown: %w)", &AddressError{Host: host, Addrs: internal}, err)
	}
	if serverInternal {
		return addrs, nil
	}
	return nil, &AddressError{Host: host, Addrs: internal}
}

// serverInternal reports whether the MCP server is on an internal
// address: every address of its name is internal. A name with a public
// address is a public server, whatever else it resolves to, so that a
// public name that also resolves to 127.0.0.1 cannot turn the guard off.
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
	internal := true
	for _, a := range addrs {
		internal = internal && Internal(a)
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

// The IPv6 ranges that carry an IPv4 address, which a dial may reach
// through a translator or tunnel: such an address is judged by the IPv4
// address inside (see embeddedIPv4).
var (
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052 well-known NAT64 prefix: IPv4 in the last 32 bits
	nat64LocalPrefix = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215 local-use NAT64: the IPv4's place depends on the operator's prefix length
	sixToFourPrefix  = netip.MustParsePrefix("2002::/16")      // RFC 3056 6to4: IPv4 in bits 16-47
	compatPrefix     = netip.MustParsePrefix("::/96")          // RFC 4291 IPv4-compatible (deprecated): IPv4 in the last 32 bits
	teredoPrefix     = netip.MustParsePrefix("2001::/32")      // RFC 4380 Teredo: server IPv4 in bits 32-63, client IPv4 inverted in the last 32
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address a carries, in
// the forms a connection may be translated or tunnelled to: IPv4-mapped,
// IPv4-compatible, NAT64 (well-known prefix), 6to4 and Teredo (both the
// server and the client address). ok is false when a is not such an
// address; local reports a local-use NAT64 address, whose IPv4 cannot be
// told without the operator's prefix length.
func embeddedIPv4(a netip.Addr) (v4 []netip.Addr, local, ok bool) {
	if !a.Is6() {
		return nil, false, false
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case a.Is4In6():
		return []netip.Addr{last}, false, true
	case compatPrefix.Contains(a), nat64Prefix.Contains(a):
		return []netip.Addr{last}, false, true
	case nat64LocalPrefix.Contains(a):
		return nil, true, true
	case sixToFourPrefix.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}, false, true
	case teredoPrefix.Contains(a):
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{server, client}, false, true
	}
	return nil, false, false
}

// Internal reports whether a is an address the authorization traffic of
// a public MCP server must not reach: anything but a global unicast
// address, and the private, shared and link-local ranges. An IPv6 address
// that carries an IPv4 one (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible
// ::a.b.c.d, NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::, Teredo) is
// judged by the IPv4 inside: internal when any of them is; a local-use
// NAT64 address (64:ff9b:1::/48) is always internal.
func Internal(a netip.Addr) bool {
	if a.Zone() != "" {
		return true // scoped to a link
	}
	if v4s, local, ok := embeddedIPv4(a); ok {
		if local {
			return true
		}
		for _, v4 := range v4s {
			if internalAddr(v4) {
				return true
			}
		}
		if a.Is4In6() {
			return false // the IPv4 address is the whole of it
		}
	}
	return internalAddr(a)
}

// internalAddr is Internal without looking inside IPv6 addresses.
func internalAddr(a netip.Addr) bool {
	return !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		sharedAddressSpace.Contains(a) || a.Zone() != ""
}
