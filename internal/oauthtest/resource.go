package oauthtest

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ResourceServer is a protected MCP server for a real authorization
// server: it publishes protected resource metadata naming the issuer,
// validates JWT access tokens (signature by the issuer's JWKS, audience =
// the resource, expiry) and passes valid requests to the MCP server.
type ResourceServer struct {
	*httptest.Server
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	issuer   string
	scopes   []string
	keys     map[string]*rsa.PublicKey // by kid
	requests []Request
}

// NewResourceServer protects upstream (the MCP server's base URL). The
// resource is URL+"/mcp"; set the issuer before the first request.
func NewResourceServer(upstream string, scopes ...string) (*ResourceServer, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	rs := &ResourceServer{scopes: scopes, keys: map[string]*rsa.PublicKey{}}
	rs.proxy = httputil.NewSingleHostReverseProxy(u)
	rs.proxy.FlushInterval = -1
	rs.proxy.ErrorLog = log.New(io.Discard, "", 0)
	rs.Server = httptest.NewServer(http.HandlerFunc(rs.serve))
	return rs, nil
}

// Resource is the protected resource's URL (the MCP endpoint).
func (rs *ResourceServer) Resource() string { return rs.URL + "/mcp" }

// SetIssuer names the authorization server.
func (rs *ResourceServer) SetIssuer(issuer string) { rs.mu.Lock(); rs.issuer = issuer; rs.mu.Unlock() }

// Requests returns the requests so far.
func (rs *ResourceServer) Requests() []Request {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]Request(nil), rs.requests...)
}

func (rs *ResourceServer) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
		rs.mu.Lock()
		doc := map[string]any{"resource": rs.Resource(), "authorization_servers": []string{rs.issuer}, "scopes_supported": rs.scopes}
		rs.mu.Unlock()
		writeJSON(w, 200, doc)
		return
	}
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	err := rs.validate(bearer)
	rs.mu.Lock()
	rs.requests = append(rs.requests, Request{Method: r.Method, Path: r.URL.Path, Bearer: bearer, Valid: err == nil})
	rs.mu.Unlock()
	if err != nil {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="%s"`,
			rs.URL, strings.Join(rs.scopes, " ")))
		writeJSON(w, 401, map[string]string{"error": "invalid_token", "error_description": err.Error()})
		return
	}
	r.Header.Del("Authorization")
	rs.proxy.ServeHTTP(w, r)
}

func (rs *ResourceServer) validate(token string) error {
	if token == "" {
		return fmt.Errorf("no token")
	}
	_, err := jwt.Parse(token, rs.key, jwt.WithValidMethods([]string{"RS256", "PS256"}),
		jwt.WithAudience(rs.Resource()), jwt.WithExpirationRequired(), jwt.WithIssuer(rs.issuerNow()))
	return err
}

func (rs *ResourceServer) issuerNow() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.issuer
}

// key returns the verification key of a token, fetching the issuer's
// JWKS when the key id is unknown.
func (rs *ResourceServer) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	rs.mu.Lock()
	k, ok := rs.keys[kid]
	issuer := rs.issuer
	rs.mu.Unlock()
	if ok {
		return k, nil
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(issuer + "/jwks")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid, Kty, N, E string
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, j := range set.Keys {
		if j.Kty != "RSA" {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(j.N)
		e, err2 := base64.RawURLEncoding.DecodeString(j.E)
		if err1 != nil || err2 != nil {
			continue
		}
		rs.keys[j.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	if k, ok := rs.keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown key %q (have %v)", kid, slices.Collect(func(yield func(string) bool) {
		for id := range rs.keys {
			if !yield(id) {
				return
			}
		}
	}))
}
