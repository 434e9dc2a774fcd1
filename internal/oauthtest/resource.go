package oauthtest

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
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
// the resource, expiry) and passes valid requests to the MCP server. In
// DPoP mode (SetDPoP) it accepts DPoP-bound tokens only: the DPoP scheme,
// a proof that verifies (VerifyDPoPProof), is new, covers the token and
// was signed by the key of the token's cnf.jkt, and carries its nonce.
type ResourceServer struct {
	*httptest.Server
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	issuer   string
	scopes   []string
	keys     map[string]*rsa.PublicKey // by kid
	requests []Request
	dpop     bool            // DPoP-bound tokens only
	nonce    string          // the nonce demanded in DPoP proofs ("": none)
	jtis     map[string]bool // DPoP proofs seen
	nonces   int             // use_dpop_nonce answers
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

// SetDPoP makes the server accept DPoP-bound tokens only, demanding nonce
// in the proofs when it is not empty.
func (rs *ResourceServer) SetDPoP(nonce string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.dpop, rs.nonce, rs.jtis = true, nonce, map[string]bool{}
}

// NonceChallenges counts the use_dpop_nonce answers.
func (rs *ResourceServer) NonceChallenges() int { rs.mu.Lock(); defer rs.mu.Unlock(); return rs.nonces }

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
	rs.mu.Lock()
	dpop, wantNonce := rs.dpop, rs.nonce
	rs.mu.Unlock()
	scheme := "Bearer"
	if dpop {
		scheme = "DPoP"
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), scheme+" ")
	claims, err := rs.validate(token)
	req := Request{Method: r.Method, Path: r.URL.Path, Bearer: token, Valid: err == nil}
	nonce := false
	if err == nil && dpop {
		nonce, err = rs.checkProof(r, token, claims)
		req.DPoP = err == nil
	}
	rs.mu.Lock()
	rs.requests = append(rs.requests, req)
	rs.mu.Unlock()
	if err != nil {
		params := fmt.Sprintf(`resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="%s"`, rs.URL, strings.Join(rs.scopes, " "))
		code := "invalid_token"
		if nonce {
			code = "use_dpop_nonce"
			w.Header().Set("DPoP-Nonce", wantNonce)
		}
		if dpop {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP algs="ES256", error=%q, %s`, code, params))
		} else {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error=%q, %s`, code, params))
		}
		writeJSON(w, 401, map[string]string{"error": code, "error_description": err.Error()})
		return
	}
	r.Header.Del("Authorization")
	r.Header.Del("DPoP")
	rs.proxy.ServeHTTP(w, r)
}

// checkProof checks the DPoP proof of a request that carried token (valid,
// with claims). nonce reports that the proof lacked the nonce demanded.
func (rs *ResourceServer) checkProof(r *http.Request, token string, claims jwt.MapClaims) (nonce bool, err error) {
	p, err := VerifyDPoPProof(r.Header.Get("DPoP"), r.Method, rs.URL+r.URL.Path, token)
	if err != nil {
		return false, fmt.Errorf("DPoP proof: %w", err)
	}
	cnf, _ := claims["cnf"].(map[string]any)
	if jkt, _ := cnf["jkt"].(string); jkt == "" || jkt != p.JKT {
		return false, fmt.Errorf("the proof's key is not the token's (cnf.jkt %v)", cnf["jkt"])
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.jtis[p.JTI] {
		return false, errors.New("DPoP proof replayed")
	}
	rs.jtis[p.JTI] = true
	if rs.nonce != "" && p.Nonce != rs.nonce {
		rs.nonces++
		return true, errors.New("DPoP nonce required")
	}
	return false, nil
}

func (rs *ResourceServer) validate(token string) (jwt.MapClaims, error) {
	if token == "" {
		return nil, fmt.Errorf("no token")
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, rs.key, jwt.WithValidMethods([]string{"RS256", "PS256"}),
		jwt.WithAudience(rs.Resource()), jwt.WithExpirationRequired(), jwt.WithIssuer(rs.issuerNow()))
	return claims, err
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
