package authn_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// Scopes the test provider grants for the resource.
const (
	baseScope  = "mcp:tools"
	adminScope = "mcpvisor:admin"
)

// provider runs node-oidc-provider (a real authorization server) for
// resource with fresh keys, on port (0: any), and returns its issuer and
// a func ending it.
func provider(t *testing.T, resource string, port int) (string, func()) {
	t.Helper()
	return oauthtest.RunOIDCProvider(t, "../..", resource, 60,
		"OIDC_SCOPES="+baseScope+" "+adminScope, "OIDC_KEYS=1", "OIDC_PORT="+strconv.Itoa(port))
}

// freePort returns a loopback port nobody listens on (for now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

var httpClient = &http.Client{Timeout: testwait.Patience}

// clientToken gets an access token for resource by the client
// credentials grant of one of the provider's static clients.
func clientToken(t *testing.T, issuer, client, resource, scope string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(url.Values{
		"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope},
	}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, client+"-secret")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error_description"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	require.Equal(t, http.StatusOK, resp.StatusCode, tok.Error)
	require.NotEmpty(t, tok.AccessToken)
	return tok.AccessToken
}

// configure sets the algorithm and format of the tokens the provider
// issues next (its /test/config hook).
func configure(t *testing.T, issuer string, q url.Values) {
	t.Helper()
	resp, err := httpClient.Post(issuer+"/test/config?"+q.Encode(), "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// counting is a real HTTP transport that counts the requests per path.
type counting struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *counting) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// clock is a settable clock for the validator.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func itoa(n int) string { return strconv.Itoa(n) }
