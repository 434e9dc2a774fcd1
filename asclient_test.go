package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/transports"
)

// tableDNS answers from a table (the test uses no real DNS).
type tableDNS map[string]string

func (d tableDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := d[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// refusingDialer records what it is asked to dial and connects nowhere.
type refusingDialer struct {
	mu     sync.Mutex
	dialed []string
}

func (d *refusingDialer) DialContext(_ context.Context, _, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dialed = append(d.dialed, addr)
	return nil, errors.New("no network in this test")
}

// The token source the supervisor builds sends its authorization traffic
// through the guard: a public server's challenge naming metadata on the
// cloud metadata address, or on a name that resolves to loopback, is
// never fetched; the server's own public address is.
func TestAuthSourceTrafficIsGuarded(t *testing.T) {
	for _, challenge := range []string{
		`Bearer resource_metadata="https://169.254.169.254/latest/meta-data/"`,
		`Bearer resource_metadata="https://10.0.0.8/prm"`,
		`Bearer resource_metadata="https://sneaky.example.com/prm"`,
	} {
		d := &refusingDialer{}
		dns := tableDNS{"mcp.example.com": "203.0.113.10", "sneaky.example.com": "127.0.0.1"}
		cfg := ServerConfig{Config: transports.Config{Type: transports.TypeHTTP, URL: "https://mcp.example.com/mcp"},
			OAuth: json.RawMessage(`{"clientId":"c","clientSecret":"s","grant":"client_credentials"}`)}
		src, err := NewAuthSource("remote", cfg, OAuthOptions{AddressGuard: oauth.GuardOptions{Resolver: dns, Dialer: d,
			Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }}}, zerolog.Nop())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, err = src.Unauthorized(ctx, http.StatusUnauthorized, []string{challenge}, "")
		cancel()
		require.Error(t, err, "no authorization server could be reached")
		assert.Equal(t, []string{"203.0.113.10:443", "203.0.113.10:443"}, d.dialed,
			"%s: only the server's own well-known URLs were dialled", challenge)
	}
}
