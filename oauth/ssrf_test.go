package oauth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDNS answers from a table: the tests never use real DNS.
type fakeDNS map[string][]netip.Addr

func (d fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := d[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// routingDialer records every address the guard lets it dial and
// connects each to the test's one backend, whatever the address: the
// "internet" of the test.
type routingDialer struct {
	backend string
	mu      sync.Mutex
	dialed  []string
}

func (d *routingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.backend)
}

func (d *routingDialer) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// ssrfBackend is every HTTPS host of the tests at once: it answers as the
// host the request names (Host header). The MCP server's metadata lists
// the authorization server of its query, and every authorization server
// has a token endpoint on the host its "token" path names.
func ssrfBackend(t *testing.T, authServer, tokenHost string) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		self := "https://" + r.Host
		switch {
		case strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource"):
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": self + "/mcp", "authorization_servers": []string{authServer}})
		case strings.HasPrefix(r.URL.Path, "/.well-known/oauth-authorization-server"):
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": self, "token_endpoint": "https://" + tokenHost + "/token",
				"authorization_endpoint": self + "/authorize", "code_challenge_methods_supported": []string{"S256"}})
		case r.URL.Path == "/token":
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at-" + r.Host, "token_type": "Bearer", "expires_in": 3600})
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// guardedFor returns the guarded client of the MCP server at serverURL in
// the test's world: fake DNS, every dial routed to the backend, the
// backend's certificate trusted.
func guardedFor(t *testing.T, srv *httptest.Server, dns fakeDNS, serverURL string) (*http.Client, *routingDialer) {
	d := &routingDialer{backend: srv.Listener.Addr().String()}
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c, err := NewGuardedClient(serverURL, GuardOptions{Resolver: dns, Dialer: d, TLS: &tls.Config{RootCAs: roots},
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	require.NoError(t, err)
	return c, d
}

var world = fakeDNS{
	"mcp.example.com":         addrs("203.0.113.10"), // a public MCP server
	"as.example.com":          addrs("198.51.100.7"), // its public authorization server
	"evil.example.com":        addrs("127.0.0.1"),    // a public name for loopback
	"mixed.example.com":       addrs("10.0.0.9", "198.51.100.8"),
	"intranet.example.com":    addrs("10.0.0.5"), // an MCP server on a private network
	"intranet-as.example.com": addrs("10.0.0.7"), // and its authorization server
	"metadata.example.com":    addrs("169.254.169.254"),
	"v6-local.example.com":    addrs("fe80::1"),
	"mapped.example.com":      addrs("::ffff:192.168.1.1"),
	"nat64.example.com":       addrs("64:ff9b::a9fe:a9fe"),             // NAT64 of 169.254.169.254
	"sixtofour.example.com":   addrs("2002:7f00:1::1"),                 // 6to4 of 127.0.0.1
	"compat.example.com":      addrs("::a00:5"),                        // IPv4-compatible 10.0.0.5
	"mixed-mcp.example.com":   addrs("203.0.113.11", "127.0.0.1"),      // a public MCP server's name that also resolves to loopback
	"mixed-v6.example.com":    addrs("198.51.100.9", "64:ff9b::a00:1"), // a public address beside a NAT64 private one
}

// A public MCP server's metadata cannot send mcpvisor to an internal
// address: an authorization server on the cloud metadata address, in
// 10/8, or behind a public name that resolves to 127.0.0.1 is refused
// with ErrForbiddenAddress, and nothing is dialled there; a public one
// works.
func TestGuardRefusesInternalAuthServers(t *testing.T) {
	for _, tc := range []struct {
		name, issuer string
		refused      bool
	}{
		{"cloud metadata address", "https://169.254.169.254", true},
		{"10/8", "https://10.1.2.3", true},
		{"a name resolving to 127.0.0.1", "https://evil.example.com", true},
		{"a name resolving to the metadata address", "https://metadata.example.com", true},
		{"IPv6 link-local", "https://v6-local.example.com", true},
		{"IPv4-mapped private", "https://mapped.example.com", true},
		{"loopback literal", "https://127.0.0.1", true},
		{"a public server", "https://as.example.com", false},
		{"a name with a public and a private address", "https://mixed.example.com", true},
		{"a name with a public and a NAT64 private address", "https://mixed-v6.example.com", true},
		{"NAT64 of the metadata address", "https://nat64.example.com", true},
		{"6to4 of loopback", "https://sixtofour.example.com", true},
		{"IPv4-compatible private", "https://compat.example.com", true},
		{"NAT64 literal of loopback", "https://[64:ff9b::7f00:1]", true},
		{"6to4 literal of 10/8", "https://[2002:a00:1::1]", true},
		{"IPv4-compatible literal of the metadata address", "https://[::a9fe:a9fe]", true},
		{"IPv4-mapped literal of loopback", "https://[::ffff:127.0.0.1]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := ssrfBackend(t, tc.issuer, "as.example.com")
			client, dialer := guardedFor(t, srv, world, "https://mcp.example.com/mcp")
			prm, err := DiscoverResource(ctx(t), client, "https://mcp.example.com/mcp", "")
			require.NoError(t, err, "the MCP server's own metadata is public")
			require.Equal(t, []string{tc.issuer}, prm.AuthorizationServers)

			md, err := DiscoverServer(ctx(t), client, tc.issuer)
			for _, a := range dialer.addrs() {
				ap := netip.MustParseAddrPort(a)
				assert.False(t, Internal(ap.Addr()), "dialled the internal address %s", a)
			}
			if !tc.refused {
				require.NoError(t, err)
				assert.Equal(t, tc.issuer, md.Issuer)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrForbiddenAddress)
			var ae *AddressError
			require.ErrorAs(t, err, &ae)
			assert.NotEmpty(t, ae.Addrs)
		})
	}
}

// A public MCP server whose name also resolves to an internal address is
// still a public server: the guard stays on, and its metadata cannot send
// mcpvisor to loopback.
func TestGuardMixedServerNameKeepsTheGuard(t *testing.T) {
	srv := ssrfBackend(t, "https://evil.example.com", "as.example.com")
	client, dialer := guardedFor(t, srv, world, "https://mixed-mcp.example.com/mcp")
	_, err := DiscoverServer(ctx(t), client, "https://evil.example.com")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrForbiddenAddress)
	_, err = DiscoverResource(ctx(t), client, "https://mixed-mcp.example.com/mcp", "")
	assert.ErrorIs(t, err, ErrForbiddenAddress, "the server's own name has an internal address")
	assert.Empty(t, dialer.addrs())

	// A server whose every address is internal keeps its neighbours.
	client, _ = guardedFor(t, srv, fakeDNS{"lab.example.com": addrs("10.0.0.2", "127.0.0.1"), "evil.example.com": addrs("127.0.0.1")}, "https://lab.example.com/mcp")
	_, err = DiscoverServer(ctx(t), client, "https://evil.example.com")
	require.NoError(t, err)
}

// rebindingDNS answers a public address to the first lookup of a name
// and loopback to every later one, counting them: a guard that checked
// one answer and dialled another would reach loopback.
type rebindingDNS struct {
	mu      sync.Mutex
	lookups map[string]int
}

func (d *rebindingDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups[host]++
	if d.lookups[host] == 1 {
		return addrs("198.51.100.20"), nil
	}
	return addrs("127.0.0.1"), nil
}

// Each connection resolves its host once and dials the address it
// checked: a name that rebinds to loopback after the check is never
// dialled there, and a new connection to it (which resolves again) is
// refused.
func TestGuardDialsTheCheckedAddress(t *testing.T) {
	srv := ssrfBackend(t, "https://as.example.com", "as.example.com")
	dns := &rebindingDNS{lookups: map[string]int{}}
	d := &routingDialer{backend: srv.Listener.Addr().String()}
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client, err := NewGuardedClient("https://203.0.113.10/mcp", GuardOptions{Resolver: dns, Dialer: d, TLS: &tls.Config{RootCAs: roots},
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	require.NoError(t, err)
	_, err = DiscoverServer(ctx(t), client, "https://rebind.example.com")
	require.NoError(t, err)
	assert.Equal(t, []string{"198.51.100.20:443"}, d.addrs(), "the checked address, not the name")
	assert.Equal(t, 1, dns.lookups["rebind.example.com"], "one resolution per connection")

	client.CloseIdleConnections()
	_, err = DiscoverServer(ctx(t), client, "https://rebind.example.com")
	assert.ErrorIs(t, err, ErrForbiddenAddress)
	assert.Equal(t, []string{"198.51.100.20:443"}, d.addrs(), "loopback is never dialled")
}

// A token request is refused the same way: a public authorization
// server whose metadata names a token endpoint in 10/8 gets no request.
func TestGuardRefusesAnInternalTokenEndpoint(t *testing.T) {
	srv := ssrfBackend(t, "https://as.example.com", "10.9.8.7")
	client, dialer := guardedFor(t, srv, world, "https://mcp.example.com/mcp")
	s, err := NewSource(Config{ServerURL: "https://mcp.example.com/mcp", Grant: GrantClientCredentials,
		ClientID: "c", ClientSecret: "s", HTTPClient: client})
	require.NoError(t, err)
	_, _, err = s.Unauthorized(ctx(t), http.StatusUnauthorized, []string{`Bearer realm="mcp"`}, "")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrForbiddenAddress)
	for _, a := range dialer.addrs() {
		assert.NotContains(t, a, "10.9.8.7")
	}

	// The same flow with a public token endpoint gets its token.
	ok := ssrfBackend(t, "https://as.example.com", "as.example.com")
	client, _ = guardedFor(t, ok, world, "https://mcp.example.com/mcp")
	s, err = NewSource(Config{ServerURL: "https://mcp.example.com/mcp", Grant: GrantClientCredentials,
		ClientID: "c", ClientSecret: "s", HTTPClient: client})
	require.NoError(t, err)
	tok, retry, err := s.Unauthorized(ctx(t), http.StatusUnauthorized, []string{`Bearer realm="mcp"`}, "")
	require.NoError(t, err)
	assert.True(t, retry)
	assert.Equal(t, "at-as.example.com", tok)
}

// An MCP server that is itself on a private network may use an
// authorization server there (or on loopback): nothing is refused.
func TestGuardAllowsInternalServersTheirNeighbours(t *testing.T) {
	srv := ssrfBackend(t, "https://intranet-as.example.com", "intranet-as.example.com")
	client, dialer := guardedFor(t, srv, world, "https://intranet.example.com/mcp")
	prm, err := DiscoverResource(ctx(t), client, "https://intranet.example.com/mcp", "")
	require.NoError(t, err)
	md, err := DiscoverServer(ctx(t), client, prm.AuthorizationServers[0])
	require.NoError(t, err)
	assert.Equal(t, "https://intranet-as.example.com", md.Issuer)
	assert.Contains(t, dialer.addrs(), "10.0.0.7:443")
}

// A redirect is a request like any other: a public metadata URL that
// redirects to the metadata address is refused.
func TestGuardChecksRedirects(t *testing.T) {
	srv := httptest.NewTLSServer(http.RedirectHandler("https://169.254.169.254/latest/meta-data/", http.StatusFound))
	t.Cleanup(srv.Close)
	client, dialer := guardedFor(t, srv, world, "https://mcp.example.com/mcp")
	_, err := client.Get("https://as.example.com/.well-known/oauth-authorization-server")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrForbiddenAddress)
	assert.Equal(t, []string{"198.51.100.7:443"}, dialer.addrs())
}

// A name that does not resolve is an error, not an allowed address; the
// guard can be turned off.
func TestGuardLookupFailuresAndOff(t *testing.T) {
	srv := ssrfBackend(t, "https://as.example.com", "as.example.com")
	client, _ := guardedFor(t, srv, world, "https://mcp.example.com/mcp")
	_, err := client.Get("https://nowhere.example.com/")
	require.Error(t, err)
	var dnsErr *net.DNSError
	assert.True(t, errors.As(err, &dnsErr), "%v", err)

	d := &routingDialer{backend: srv.Listener.Addr().String()}
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	off, err := NewGuardedClient("https://mcp.example.com/mcp", GuardOptions{Resolver: world, Dialer: d, TLS: &tls.Config{RootCAs: roots}, AllowInternal: true,
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	require.NoError(t, err)
	_, err = DiscoverServer(ctx(t), off, "https://evil.example.com")
	require.NoError(t, err, "with the guard off, any address")
	assert.Equal(t, []string{"evil.example.com:443"}, d.addrs(), "the name is dialled as it is")
}

func TestInternalAddresses(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254", "100.64.0.1", "100.100.100.200",
		"0.0.0.0", "255.255.255.255", "224.0.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12::1", "::ffff:10.0.0.1", "ff02::1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1", "64:ff9b:1::808:808", "2002:a00:1::1", "2002:7f00:1::",
		"2002:a9fe:a9fe:1::1", "::7f00:1", "::a00:1", "::ffff:127.0.0.1", "::ffff:169.254.169.254",
		"2001:0:4136:e378:8000:63bf:f5ff:fffe", "2001:0:a00:1::1", "::ffff:8.8.8.8%eth0", "2001:4860::1%eth0"} {
		assert.True(t, Internal(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "198.51.100.7", "203.0.113.10", "2001:4860:4860::8888", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1", "::808:808", "2001:0:4136:e378:8000:63bf:3fff:fdd2"} {
		assert.False(t, Internal(netip.MustParseAddr(a)), a)
	}
}
