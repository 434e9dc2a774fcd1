package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func newSource(t *testing.T, f *fakeAS, configure func(*Config)) *Source {
	cfg := Config{ServerURL: f.mcpURL(), UserAgent: &HeadlessUserAgent{}}
	if configure != nil {
		configure(&cfg)
	}
	s, err := NewSource(cfg)
	require.NoError(t, err)
	return s
}

// call GETs the MCP endpoint through the source's Transport.
func call(t *testing.T, s *Source, u string) (*http.Response, error) {
	c := &http.Client{Transport: &Transport{Source: s}}
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	return resp, err
}

func mustCall(t *testing.T, s *Source, u string) {
	t.Helper()
	resp, err := call(t, s, u)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
}

func TestParseChallenges(t *testing.T) {
	cases := []struct {
		name    string
		headers []string
		want    []Challenge
	}{
		{"bearer with params", []string{`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="a b"`},
			[]Challenge{{Scheme: "bearer", Params: map[string]string{"resource_metadata": "https://x/.well-known/oauth-protected-resource", "scope": "a b"}}}},
		{"several per header", []string{`Basic realm="r", Bearer error="insufficient_scope", scope="x"`},
			[]Challenge{{Scheme: "basic", Params: map[string]string{"realm": "r"}}, {Scheme: "bearer", Params: map[string]string{"error": "insufficient_scope", "scope": "x"}}}},
		{"several headers", []string{`Negotiate abc==`, `Bearer realm=api`},
			[]Challenge{{Scheme: "negotiate", Params: map[string]string{}, Token68: "abc=="}, {Scheme: "bearer", Params: map[string]string{"realm": "api"}}}},
		{"spaces around = and single quotes", []string{`Bearer scope = 'read write' , error= invalid_token`},
			[]Challenge{{Scheme: "bearer", Params: map[string]string{"scope": "read write", "error": "invalid_token"}}}},
		{"duplicates keep first", []string{`Bearer scope="a", scope="b"`},
			[]Challenge{{Scheme: "bearer", Params: map[string]string{"scope": "a"}}}},
		{"escapes and case", []string{`BEARER Error="x\"y", RESOURCE_METADATA=https://h/p`},
			[]Challenge{{Scheme: "bearer", Params: map[string]string{"error": `x"y`, "resource_metadata": "https://h/p"}}}},
		{"bare scheme", []string{`Bearer`}, []Challenge{{Scheme: "bearer", Params: map[string]string{}}}},
		{"empty", []string{``, `  , ,`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, ParseChallenges(c.headers))
		})
	}
	b, ok := ParseBearer([]string{`Basic realm="x"`, `Bearer error="insufficient_scope", scope="a b", resource_metadata="u"`})
	require.True(t, ok)
	assert.Equal(t, BearerChallenge{ResourceMetadata: "u", Scope: "a b", Error: "insufficient_scope"}, b)
	assert.Equal(t, []string{"a", "b"}, b.Scopes())
}

func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{`Bearer realm="x", scope="a b"`, `Basic abc==, Bearer error=x`, `a b=c,d=e f g`, `"`, `x='`, `Bearer a="\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, c := range ParseChallenges([]string{h}) {
			if c.Scheme == "" || c.Scheme != strings.ToLower(c.Scheme) {
				t.Fatalf("bad scheme %q", c.Scheme)
			}
		}
		ParseBearer([]string{h, h})
	})
}

func TestDiscoveryURLOrders(t *testing.T) {
	got, err := ResourceMetadataURLs("https://h/a/mcp", "https://h/custom")
	require.NoError(t, err)
	assert.Equal(t, []string{"https://h/custom", "https://h/.well-known/oauth-protected-resource/a/mcp", "https://h/.well-known/oauth-protected-resource"}, got)
	got, _ = ResourceMetadataURLs("https://H/", "")
	assert.Equal(t, []string{"https://h/.well-known/oauth-protected-resource"}, got)

	got, _ = ServerMetadataURLs("https://as.example/tenant1")
	assert.Equal(t, []string{
		"https://as.example/.well-known/oauth-authorization-server/tenant1",
		"https://as.example/.well-known/openid-configuration/tenant1",
		"https://as.example/tenant1/.well-known/openid-configuration",
	}, got)
	got, _ = ServerMetadataURLs("https://as.example/")
	assert.Equal(t, []string{"https://as.example/.well-known/oauth-authorization-server", "https://as.example/.well-known/openid-configuration"}, got)

	for in, want := range map[string]string{
		"HTTPS://MCP.Example.com/mcp/": "https://mcp.example.com/mcp",
		"https://h/mcp#frag":           "https://h/mcp",
		"https://h":                    "https://h",
		"https://h/":                   "https://h",
	} {
		c, err := CanonicalResource(in)
		require.NoError(t, err)
		assert.Equal(t, want, c, in)
	}
	assert.NoError(t, checkEndpoint("http://localhost:1/x"))
	assert.NoError(t, checkEndpoint("http://127.0.0.1:1/x"))
	assert.ErrorIs(t, checkEndpoint("http://example.com/x"), ErrInsecureEndpoint)
	assert.ErrorIs(t, checkEndpoint("javascript:alert(1)"), ErrInsecureEndpoint)
}

func TestDiscoveryVariants(t *testing.T) {
	cases := []struct {
		name      string
		configure func(*fakeAS)
		never     []string // requests that must not happen
	}{
		{"path PRM in header", func(f *fakeAS) {}, []string{"GET /.well-known/oauth-protected-resource"}},
		{"path PRM not in header, AS via OIDC", func(f *fakeAS) { f.prmInHeader = false; f.asAt = "oidc-insert" }, []string{"GET /.well-known/oauth-protected-resource"}},
		{"root PRM with bare origin, tenant issuer", func(f *fakeAS) { f.prmAt = "root"; f.prmInHeader = false; f.issuerPath = "/tenant1" },
			[]string{"GET /.well-known/oauth-authorization-server", "GET /.well-known/openid-configuration"}},
		{"custom PRM, OIDC appended to the tenant path (Keycloak)", func(f *fakeAS) { f.prmAt = "custom"; f.issuerPath = "/realms/r"; f.asAt = "oidc-append" },
			[]string{"GET /.well-known/oauth-authorization-server", "GET /.well-known/openid-configuration", "GET /.well-known/oauth-protected-resource"}},
		{"issuer without path and a trailing slash in metadata", func(f *fakeAS) { f.asIssuer = "placeholder" }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAS(t, c.configure)
			if f.asIssuer == "placeholder" {
				f.asIssuer = f.issuer() + "/"
			}
			s := newSource(t, f, nil)
			mustCall(t, s, f.mcpURL())
			reqs := f.requests()
			for _, n := range c.never {
				assert.NotContains(t, reqs, n)
			}
			assert.Equal(t, 1, f.count("GET "+f.issuerPath+"/authorize"), reqs)
			st := s.Status()
			assert.True(t, st.Authorized)
			// resource on authorize and token requests alike.
			require.Len(t, f.authReqs, 1)
			res := f.authReqs[0].Get("resource")
			assert.Equal(t, res, f.tokenReqs[0].Get("resource"))
			if f.prmAt == "root" {
				assert.Equal(t, f.url(), res) // the PRM's resource, verbatim
			} else {
				assert.Equal(t, f.mcpURL(), res)
			}
		})
	}
}

func TestIssuerMismatchRefused(t *testing.T) {
	for _, bad := range []string{"https://evil.example", "/tenant1/"} {
		f := newFakeAS(t, func(f *fakeAS) { f.issuerPath = "/tenant1" })
		if strings.HasPrefix(bad, "/") {
			f.asIssuer = f.url() + bad // a trailing slash on an issuer with a path is a mismatch
		} else {
			f.asIssuer = bad
		}
		s := newSource(t, f, nil)
		_, err := call(t, s, f.mcpURL())
		require.ErrorIs(t, err, ErrIssuerMismatch)
		assert.Zero(t, f.count("GET /tenant1/authorize"))
	}
}

func TestResourceMismatchAbortsBeforeAuthorize(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.prmResource = "https://evil.example.com/mcp" })
	s := newSource(t, f, nil)
	_, err := call(t, s, f.mcpURL())
	require.ErrorIs(t, err, ErrResourceMismatch)
	assert.Zero(t, f.count("GET /authorize"))
	assert.Zero(t, f.count("POST /register"))
}

func TestPKCERequired(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.noPKCE = true })
	s := newSource(t, f, nil)
	_, err := call(t, s, f.mcpURL())
	require.ErrorIs(t, err, ErrNoPKCE)
	assert.Zero(t, f.count("GET /authorize"))

	s = newSource(t, f, func(c *Config) { c.AllowNoPKCE = true })
	mustCall(t, s, f.mcpURL())
	assert.Equal(t, "S256", f.authReqs[0].Get("code_challenge_method"))
}

func TestCodeFlowDetails(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) {
		f.prmScopes = []string{"mcp:read", "mcp:write"}
		f.asScopes = []string{"mcp:read", "mcp:write", "offline_access", "admin"}
		f.issSupported = true
	})
	s := newSource(t, f, nil)
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.regs, 1)
	assert.Equal(t, "native", f.regs[0]["application_type"])
	assert.Contains(t, f.regs[0]["grant_types"], "refresh_token")
	q := f.authReqs[0]
	assert.Equal(t, "mcp:read mcp:write offline_access", q.Get("scope"), "PRM scopes plus offline_access, never the AS-wide list")
	assert.NotEmpty(t, q.Get("state"))
	assert.Equal(t, "S256", q.Get("code_challenge_method"))

	// Without offline_access in the AS list, and a challenge scope.
	f2 := newFakeAS(t, func(f *fakeAS) {
		f.challengeScp = "only:this"
		f.prmScopes = []string{"a", "b"}
		f.asScopes = []string{"a"}
	})
	mustCall(t, newSource(t, f2, nil), f2.mcpURL())
	assert.Equal(t, "only:this", f2.authReqs[0].Get("scope"))

	// No scopes anywhere: omitted.
	f3 := newFakeAS(t, nil)
	mustCall(t, newSource(t, f3, nil), f3.mcpURL())
	_, has := f3.authReqs[0]["scope"]
	assert.False(t, has)
}

// lyingAgent returns a redirect with the given changes.
type lyingAgent struct {
	HeadlessUserAgent
	edit func(url.Values)
}

func (l *lyingAgent) Authorize(ctx context.Context, u string) (url.Values, error) {
	q, err := l.HeadlessUserAgent.Authorize(ctx, u)
	if err == nil {
		l.edit(q)
	}
	return q, err
}

func TestAuthorizationResponseChecks(t *testing.T) {
	cases := []struct {
		name      string
		configure func(*fakeAS)
		edit      func(url.Values)
		want      error
	}{
		{"state changed", nil, func(q url.Values) { q.Set("state", "other") }, ErrStateMismatch},
		{"state missing", nil, func(q url.Values) { q.Del("state") }, ErrStateMismatch},
		{"iss advertised but absent", func(f *fakeAS) { f.issSupported = true; f.sendIss = "-" }, func(url.Values) {}, ErrIssuerMismatch},
		{"iss wrong though not advertised", func(f *fakeAS) { f.sendIss = "https://evil.example" }, func(url.Values) {}, ErrIssuerMismatch},
		{"iss with a trailing slash", func(f *fakeAS) { f.issSupported = true }, func(q url.Values) { q.Set("iss", q.Get("iss")+"/") }, ErrIssuerMismatch},
		{"iss unadvertised but correct is fine", func(f *fakeAS) { f.sendIss = "placeholder" }, func(url.Values) {}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAS(t, c.configure)
			if f.sendIss == "placeholder" {
				f.sendIss = f.issuer()
			}
			s := newSource(t, f, func(cfg *Config) { cfg.UserAgent = &lyingAgent{edit: c.edit} })
			resp, err := call(t, s, f.mcpURL())
			if c.want == nil {
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				return
			}
			require.ErrorIs(t, err, c.want)
			assert.Zero(t, f.count("POST /token"), "no code exchange after a bad response")
		})
	}
}

func TestClientIdentityOrder(t *testing.T) {
	// Pre-registered wins over CIMD and DCR.
	f := newFakeAS(t, func(f *fakeAS) { f.cimd = true; f.authMethods = []string{"client_secret_post"} })
	mustCall(t, newSource(t, f, func(c *Config) {
		c.ClientID, c.ClientSecret, c.ClientMetadataURL = "pre", "pre-secret", "https://client.example/md.json"
	}), f.mcpURL())
	assert.Equal(t, "pre", f.authReqs[0].Get("client_id"))
	assert.Equal(t, "pre-secret", f.tokenReqs[0].Get("client_secret"), "client_secret_post from the AS list")
	assert.Empty(t, f.regs)

	// CIMD when supported.
	f = newFakeAS(t, func(f *fakeAS) { f.cimd = true })
	mustCall(t, newSource(t, f, func(c *Config) { c.ClientMetadataURL = "https://client.example/md.json" }), f.mcpURL())
	assert.Equal(t, "https://client.example/md.json", f.authReqs[0].Get("client_id"))
	assert.Empty(t, f.regs)

	// DCR otherwise; the auth method comes from the registration response.
	f = newFakeAS(t, func(f *fakeAS) { f.authMethods = []string{"client_secret_basic"} })
	mustCall(t, newSource(t, f, func(c *Config) { c.ClientMetadataURL = "https://client.example/md.json" }), f.mcpURL())
	require.Len(t, f.regs, 1)
	assert.Equal(t, "client_secret_basic", f.regs[0]["token_endpoint_auth_method"])
	assert.True(t, strings.HasPrefix(f.authHdrs[0], "Basic "))
	assert.Empty(t, f.tokenReqs[0].Get("client_secret"))

	// Nothing possible.
	f = newFakeAS(t, func(f *fakeAS) { f.noDCR = true })
	_, err := call(t, newSource(t, f, nil), f.mcpURL())
	assert.ErrorIs(t, err, ErrNoClient)
}

func TestLegacyFallback(t *testing.T) {
	// No PRM, no metadata: the 2025-03-26 default endpoints on the origin.
	f := newFakeAS(t, func(f *fakeAS) { f.prmAt = "none"; f.prmInHeader = false; f.asAt = "none" })
	s := newSource(t, f, nil)
	mustCall(t, s, f.mcpURL())
	assert.Equal(t, 1, f.count("POST /register"))
	assert.Equal(t, 1, f.count("GET /authorize"))
	assert.Equal(t, f.url(), s.Status().Issuer)
}

func TestRefreshRotationAndResource(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	store := &FileStore{Path: filepath.Join(t.TempDir(), "tokens.json")}
	f := newFakeAS(t, func(f *fakeAS) { f.expiresIn = 600 })
	s := newSource(t, f, func(c *Config) { c.Store = store; c.Now = clock })
	mustCall(t, s, f.mcpURL())
	fi, err := os.Stat(store.Path)
	require.NoError(t, err)
	if runtime.GOOS != "windows" { // there a DACL, not the mode, makes it owner-only (internal/owneronly's test)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	e, err := store.Load(ctx(t), f.mcpURL(), "")
	require.NoError(t, err)
	first := e.Token.RefreshToken

	// Within the margin: 20 concurrent requests, one refresh.
	advance(590 * time.Second)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { mustCall(t, s, f.mcpURL()) })
	}
	testwait.Call(t, "the 20 concurrent calls", wg.Wait)
	assert.Equal(t, 1, f.count("POST /token")-1, "exactly one refresh")
	last := f.tokenReqs[len(f.tokenReqs)-1]
	assert.Equal(t, "refresh_token", last.Get("grant_type"))
	assert.Equal(t, f.mcpURL(), last.Get("resource"), "resource on refresh too")
	e, _ = store.Load(ctx(t), f.mcpURL(), "")
	assert.NotEqual(t, first, e.Token.RefreshToken, "the rotated refresh token is persisted")
	assert.Zero(t, f.reuse)

	// A 401 on a valid-looking token: one refresh and one retry.
	f.expireAccess()
	mustCall(t, s, f.mcpURL())
	assert.Equal(t, 2, s.Status().Refreshes)

	// Revoked: invalid_grant → needs login (no user agent here).
	f.revokeAll()
	s2 := newSource(t, f, func(c *Config) { c.Store = store; c.Now = clock; c.UserAgent = nil })
	resp, err := call(t, s2, f.mcpURL())
	require.NoError(t, err)
	assert.Equal(t, 401, resp.StatusCode)
	assert.True(t, s2.Status().NeedScope == "" && !s2.Status().Authorized)
}

func TestMissingExpiresInAssumesLifetime(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFakeAS(t, func(f *fakeAS) { f.expiresIn = 0 })
	s := newSource(t, f, func(c *Config) { c.Now = clock; c.DefaultLifetime = 10 * time.Minute })
	mustCall(t, s, f.mcpURL())
	st := s.Status()
	assert.Equal(t, now.Add(10*time.Minute), st.Expiry)
	mu.Lock()
	now = now.Add(9*time.Minute + 30*time.Second)
	mu.Unlock()
	mustCall(t, s, f.mcpURL())
	assert.Equal(t, 1, s.Status().Refreshes, "refreshed ahead of the assumed expiry")
}

func TestTwoSourcesShareFileStore(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	path := filepath.Join(t.TempDir(), "tokens.json")
	f := newFakeAS(t, func(f *fakeAS) { f.expiresIn = 600 })
	a := newSource(t, f, func(c *Config) { c.Store = &FileStore{Path: path}; c.Now = clock })
	mustCall(t, a, f.mcpURL())
	b := newSource(t, f, func(c *Config) { c.Store = &FileStore{Path: path}; c.Now = clock; c.UserAgent = nil })
	mustCall(t, b, f.mcpURL()) // b found a's token in the store
	assert.Equal(t, 1, f.count("GET /authorize"))

	mu.Lock()
	now = now.Add(595 * time.Second)
	mu.Unlock()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { mustCall(t, a, f.mcpURL()) })
		wg.Go(func() { mustCall(t, b, f.mcpURL()) })
	}
	testwait.Call(t, "the calls of both clients", wg.Wait)
	assert.Zero(t, f.reuse, "no refresh token spent twice")
	assert.Equal(t, 1, a.Status().Refreshes+b.Status().Refreshes)
}

func TestStepUp(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.challengeScp = "mcp:basic"; f.requireScopes = []string{"mcp:basic", "mcp:write"} })
	s := newSource(t, f, nil)
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.authReqs, 2)
	assert.Equal(t, "mcp:basic", f.authReqs[0].Get("scope"))
	assert.Equal(t, "mcp:basic mcp:write", f.authReqs[1].Get("scope"))
	assert.Len(t, f.regs, 1, "the step-up reuses the registration")

	// Endless 403: at most 1 + MaxStepUps authorizations, then the 403
	// goes back with the needed scope in the status.
	f = newFakeAS(t, func(f *fakeAS) {
		f.challengeScp = "mcp:admin"
		f.requireScopes = []string{"mcp:admin"}
		f.grantOnly = "mcp:basic"
	})
	s = newSource(t, f, nil)
	resp, err := call(t, s, f.mcpURL())
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Len(t, f.authReqs, 3)
	assert.Equal(t, "mcp:admin", s.Status().NeedScope)
	// The count starts over only after a success: another call does not
	// authorize again.
	resp, err = call(t, s, f.mcpURL())
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Len(t, f.authReqs, 3)
}

func TestNeedsAuthWithoutUserAgent(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.challengeScp = "files:read" })
	s := newSource(t, f, func(c *Config) { c.UserAgent = nil })
	resp, err := call(t, s, f.mcpURL())
	require.NoError(t, err)
	assert.Equal(t, 401, resp.StatusCode)
	assert.Equal(t, "files:read", s.Status().NeedScope)
	assert.Zero(t, f.count("GET /authorize"))

	// Login then works.
	require.NoError(t, s.Login(ctx(t), &HeadlessUserAgent{}, ""))
	assert.Equal(t, "files:read", f.authReqs[0].Get("scope"))
	mustCall(t, s, f.mcpURL())
}

func genKey(t *testing.T) (*ecdsa.PrivateKey, string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func TestClientCredentials(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.authMethods = []string{"client_secret_basic"}; f.prmScopes = []string{"m2m"} })
	s := newSource(t, f, func(c *Config) {
		c.Grant = GrantClientCredentials
		c.ClientID, c.ClientSecret = "svc", "svc-secret"
		c.UserAgent = nil
	})
	mustCall(t, s, f.mcpURL())
	assert.Zero(t, f.count("GET /authorize"))
	require.Len(t, f.tokenReqs, 1)
	assert.Equal(t, "client_credentials", f.tokenReqs[0].Get("grant_type"))
	assert.Equal(t, f.mcpURL(), f.tokenReqs[0].Get("resource"))
	assert.Equal(t, "m2m", f.tokenReqs[0].Get("scope"))
	assert.True(t, strings.HasPrefix(f.authHdrs[0], "Basic "))

	key, keyPEM := genKey(t)
	f = newFakeAS(t, func(f *fakeAS) { f.issuerPath = "/t" })
	s = newSource(t, f, func(c *Config) {
		c.Grant = GrantClientCredentials
		c.ClientID, c.PrivateKeyPEM = "svc", keyPEM
		c.UserAgent = nil
	})
	mustCall(t, s, f.mcpURL())
	form := f.tokenReqs[0]
	assert.Equal(t, "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", form.Get("client_assertion_type"))
	claims := jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(form.Get("client_assertion"), &claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil },
		jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience(f.issuer()))
	require.NoError(t, err)
	assert.Equal(t, "svc", claims.Issuer)
	assert.Equal(t, "svc", claims.Subject)
}

func TestDeadAuthServerDay(t *testing.T) {
	start := time.Now()
	now := start
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFakeAS(t, func(f *fakeAS) { f.expiresIn = 3600 })
	s := newSource(t, f, func(c *Config) { c.Now = clock })
	mustCall(t, s, f.mcpURL())
	before := len(f.requests())
	f.down = true
	// A busy host: a request every minute for a day, while the AS is down
	// (the MCP server itself still works for valid tokens).
	var errs int
	for i := 0; i < 24*60; i++ {
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
		if _, err := s.Token(ctx(t)); err != nil {
			errs++
			require.True(t, errors.Is(err, ErrTransient) || errors.Is(err, ErrBackoff), err)
		}
	}
	var asRequests int
	for _, r := range f.requests()[before:] {
		if !strings.HasPrefix(r, "GET /mcp") && !strings.Contains(r, "oauth-protected-resource") {
			asRequests++
		}
	}
	t.Logf("a day with a dead authorization server: %d requests to it, %d failed token requests", asRequests, errs)
	// Backoff doubles from 2 s to 15 min: about 96 attempts a day at most
	// once capped, plus the ramp.
	assert.LessOrEqual(t, asRequests, 24*4+20)
	assert.Positive(t, asRequests)
	// The credentials survive: once the AS is back, one refresh heals.
	f.down = false
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	tok, err := s.Token(ctx(t))
	require.NoError(t, err)
	assert.NotEmpty(t, tok)
}

func TestSecretsRedacted(t *testing.T) {
	tok := &Token{AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", Expiry: time.Now()}
	ci := &ClientInfo{ClientID: "id", ClientSecret: "CS-SECRET"}
	b1, _ := json.Marshal(tok)
	b2, _ := json.Marshal(ci)
	e := &Entry{Token: tok, Client: ci}
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%+v %#v %v", tok, tok, ci), fmt.Sprintf("%#v", ci), string(b1), string(b2), fmt.Sprintf("%+v", e)} {
		for _, secret := range []string{"AT-SECRET", "RT-SECRET", "CS-SECRET"} {
			assert.NotContains(t, s, secret)
		}
	}
}

func TestMemoryStoreLockHonoursContext(t *testing.T) {
	m := &MemoryStore{}
	unlock, err := m.Lock(ctx(t), "s")
	require.NoError(t, err)
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = m.Lock(c, "s")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	unlock()
	unlock2, err := m.Lock(ctx(t), "s")
	require.NoError(t, err)
	unlock2()

	path := filepath.Join(t.TempDir(), "s.json")
	fs1, fs2 := &FileStore{Path: path}, &FileStore{Path: path}
	u1, err := fs1.Lock(ctx(t), "x")
	require.NoError(t, err)
	c2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = fs2.Lock(c2, "x")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "flock excludes another open of the file")
	u1()
}

// A dynamic client the server purged (invalid_client) is registered anew
// at the next authorization, not replayed forever.
func TestStaleDynamicClientReregisters(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.known = map[string]bool{} })
	s := newSource(t, f, nil)
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.regs, 1)
	f.purgeClients()
	// The refresh fails with invalid_client: the registration is dropped,
	// and the new authorization registers again.
	mustCall(t, s, f.mcpURL())
	assert.Len(t, f.regs, 2)
	assert.Equal(t, "dynamic", s.Status().ClientSource)
}

// An OAuth error in a 200 answer is an error: the request gets the 401,
// and the status says why (typed, without the body).
func TestTokenErrorWithStatus200(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.error200 = true })
	s := newSource(t, f, nil)
	resp, err := call(t, s, f.mcpURL())
	require.NoError(t, err)
	assert.Equal(t, 401, resp.StatusCode)
	st := s.Status()
	assert.False(t, st.Authorized)
	assert.Contains(t, st.LastError, "invalid_grant")

	// The typed error, from the token call itself.
	c := &tokenCall{client: &http.Client{Timeout: testwait.Patience}, endpoint: f.url() + "/token", form: url.Values{"grant_type": {"refresh_token"}}, now: time.Now()}
	_, _, err = c.do(ctx(t))
	var oe *Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "invalid_grant", oe.Code)
	assert.Equal(t, 200, oe.StatusCode)
	assert.ErrorIs(t, err, ErrNeedsLogin)
}

// A failing authorization server during discovery is transient: typed,
// backed off, and nothing else is tried meanwhile.
func TestDiscoveryTransient(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.down = true })
	s := newSource(t, f, nil)
	_, err := call(t, s, f.mcpURL())
	require.ErrorIs(t, err, ErrTransient)
	n := len(f.requests())
	_, err = call(t, s, f.mcpURL())
	require.ErrorIs(t, err, ErrBackoff)
	assert.Equal(t, n+1, len(f.requests()), "only the MCP request itself; no authorization server traffic during the backoff")
	assert.False(t, s.Status().RetryAt.IsZero())
}

// Without a user agent, a 403 insufficient_scope is not stepped up: the
// 403 goes back and the status names the union of the scopes needed.
func TestStepUpWithoutUserAgentNeedsAuth(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.challengeScp = "mcp:basic"; f.requireScopes = []string{"mcp:basic", "mcp:write"} })
	s := newSource(t, f, nil)
	require.NoError(t, s.Login(ctx(t), &HeadlessUserAgent{}, "mcp:basic"))
	s2 := newSource(t, f, func(c *Config) { c.UserAgent = nil; c.Store = s.store })
	resp, err := call(t, s2, f.mcpURL())
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Equal(t, "mcp:basic mcp:write", s2.Status().NeedScope)
	assert.Len(t, f.authReqs, 1, "no authorization without a user agent")
}

// lazyCall POSTs a body to u through a Transport whose source lazy
// creates, and reports the creations asked for.
func lazyCall(t *testing.T, u string, lazy func(context.Context, bool) (*Source, error)) *http.Response {
	t.Helper()
	c := &http.Client{Transport: &Transport{Lazy: lazy}}
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, u, strings.NewReader(`{"a":1}`))
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func TestLazySourceIsCreatedByTheFirstChallenge(t *testing.T) {
	f := newFakeAS(t, nil)
	var mu sync.Mutex
	var src *Source
	var asks, creates int
	lazy := func(_ context.Context, create bool) (*Source, error) {
		mu.Lock()
		defer mu.Unlock()
		asks++
		if create && src == nil {
			creates++
			src = newSource(t, f, nil)
		}
		return src, nil
	}

	// A server that never challenges costs no source.
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Empty(t, r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusOK)
	}))
	defer open.Close()
	assert.Equal(t, 200, lazyCall(t, open.URL, lazy).StatusCode)
	assert.Nil(t, src)

	// The first 401 creates it; the request is sent again with the token
	// the authorization got, its body replayed.
	assert.Equal(t, 200, lazyCall(t, f.mcpURL(), lazy).StatusCode)
	require.NotNil(t, src)
	assert.Equal(t, 1, creates)
	assert.True(t, src.Status().Authorized)
	assert.Equal(t, 2, f.count("POST /mcp"), "one request without a token, one with")

	// From then on the source's token goes with every request.
	assert.Equal(t, 200, lazyCall(t, f.mcpURL(), lazy).StatusCode)
	assert.Equal(t, 3, f.count("POST /mcp"))
	assert.Equal(t, 1, creates)

	// An error of the lazy function fails the request.
	boom := errors.New("boom")
	c := &http.Client{Transport: &Transport{Lazy: func(context.Context, bool) (*Source, error) { return nil, boom }}}
	_, err := c.Get(open.URL)
	assert.ErrorIs(t, err, boom)
}
