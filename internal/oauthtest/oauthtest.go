// Package oauthtest is a small OAuth 2.1 authorization server in front of
// an MCP server, for tests: protected resource metadata, authorization
// server metadata at a path issuer (/as), dynamic registration, an
// authorization endpoint that grants at once (302 to the redirect URI),
// PKCE, rotating refresh tokens with reuse detection, and a reverse proxy
// that passes to the MCP server only the requests with a valid bearer
// token (WebSocket upgrades and event streams included). Every request is
// recorded. It binds 127.0.0.1 only.
package oauthtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Request is one request the server received.
type Request struct {
	Method, Path string
	// Bearer is the token the request carried ("" without).
	Bearer string
	// Valid says the token was one the server had issued and not revoked.
	Valid bool
	// DPoP says the token came with the DPoP scheme and a proof that
	// verified and matched the token's key (ResourceServer in DPoP mode).
	DPoP bool
}

// Server is the authorization server and protected resource.
type Server struct {
	*httptest.Server
	upstream *url.URL
	proxy    *httputil.ReverseProxy

	mu        sync.Mutex
	expiresIn int // seconds; 0 omits expires_in
	scopes    []string
	requests  []Request
	codes     map[string][2]string // code → challenge, scope
	access    map[string]time.Time // access token → expiry
	refresh   map[string]string    // live refresh token → scope
	spent     map[string]bool
	reuse     int
	tokenReqs []map[string][]string
	down      bool
}

// New starts a server protecting upstream (the MCP server's base URL).
// Access tokens live expiresIn seconds.
func New(upstream string, expiresIn int) (*Server, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	s := &Server{upstream: u, expiresIn: expiresIn, codes: map[string][2]string{}, access: map[string]time.Time{},
		refresh: map[string]string{}, spent: map[string]bool{}}
	s.proxy = httputil.NewSingleHostReverseProxy(u)
	s.proxy.FlushInterval = -1
	s.proxy.ErrorLog = log.New(io.Discard, "", 0) // cut streams at close are expected
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s, nil
}

// Issuer is the authorization server's issuer (with a path).
func (s *Server) Issuer() string { return s.URL + "/as" }

// SetScopes sets the resource's scopes_supported.
func (s *Server) SetScopes(scopes ...string) { s.mu.Lock(); s.scopes = scopes; s.mu.Unlock() }

// SetExpiresIn sets the lifetime of the access tokens issued from now on
// (seconds; 0 omits expires_in).
func (s *Server) SetExpiresIn(seconds int) { s.mu.Lock(); s.expiresIn = seconds; s.mu.Unlock() }

// SetDown makes the authorization server answer 503 (the resource keeps
// working for valid tokens).
func (s *Server) SetDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// TokenRequests returns the forms posted to the token endpoint.
func (s *Server) TokenRequests() []map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string][]string(nil), s.tokenReqs...)
}

// Reuse counts refresh tokens presented after they were spent.
func (s *Server) Reuse() int { s.mu.Lock(); defer s.mu.Unlock(); return s.reuse }

// ExpireAccess invalidates every access token (the next request gets 401).
func (s *Server) ExpireAccess() { s.mu.Lock(); s.access = map[string]time.Time{}; s.mu.Unlock() }

// RevokeAll ends every grant: access and refresh tokens.
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access, s.refresh = map[string]time.Time{}, map[string]string{}
}

// Tokens returns every token issued, for tests that grep logs for them.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.access {
		out = append(out, t)
	}
	for t := range s.refresh {
		out = append(out, t)
	}
	for t := range s.spent {
		out = append(out, t)
	}
	return out
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, ok := s.access[bearer]
	valid := ok && time.Now().Before(exp)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Bearer: bearer, Valid: valid})
	down := s.down
	s.mu.Unlock()
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/.well-known/oauth-protected-resource"):
		res := s.URL + strings.TrimPrefix(p, "/.well-known/oauth-protected-resource")
		doc := map[string]any{"resource": res, "authorization_servers": []string{s.Issuer()}}
		s.mu.Lock()
		if s.scopes != nil {
			doc["scopes_supported"] = s.scopes
		}
		s.mu.Unlock()
		writeJSON(w, 200, doc)
		return
	case strings.HasPrefix(p, "/.well-known/") || strings.HasPrefix(p, "/as/"):
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.serveAS(w, r)
		return
	}
	if !valid {
		challenge := fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource%s"`, s.URL, p)
		s.mu.Lock()
		if s.scopes != nil {
			challenge += fmt.Sprintf(`, scope="%s"`, strings.Join(s.scopes, " "))
		}
		s.mu.Unlock()
		w.Header().Set("WWW-Authenticate", challenge)
		writeJSON(w, 401, map[string]string{"error": "invalid_token"})
		return
	}
	r.Header.Del("Authorization")
	s.proxy.ServeHTTP(w, r)
}

func (s *Server) serveAS(w http.ResponseWriter, r *http.Request) {
	iss := s.Issuer()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server/as":
		writeJSON(w, 200, map[string]any{
			"issuer":                                         iss,
			"authorization_endpoint":                         iss + "/authorize",
			"token_endpoint":                                 iss + "/token",
			"registration_endpoint":                          iss + "/register",
			"code_challenge_methods_supported":               []string{"S256"},
			"response_types_supported":                       []string{"code"},
			"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
			"token_endpoint_auth_methods_supported":          []string{"none"},
			"authorization_response_iss_parameter_supported": true,
		})
	case "/as/register":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		writeJSON(w, 201, map[string]any{"client_id": "client-" + random(), "token_endpoint_auth_method": "none",
			"redirect_uris": body["redirect_uris"]})
	case "/as/authorize":
		q := r.URL.Query()
		to, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || q.Get("code_challenge_method") != "S256" || q.Get("resource") == "" {
			http.Error(w, "bad request", 400)
			return
		}
		code := "code-" + random()
		s.mu.Lock()
		s.codes[code] = [2]string{q.Get("code_challenge"), q.Get("scope")}
		s.mu.Unlock()
		rq := to.Query()
		rq.Set("code", code)
		rq.Set("state", q.Get("state"))
		rq.Set("iss", iss)
		to.RawQuery = rq.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	case "/as/token":
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenReqs = append(s.tokenReqs, r.PostForm)
	if r.PostForm.Get("resource") == "" {
		writeJSON(w, 400, map[string]string{"error": "invalid_target"})
		return
	}
	var scope string
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c[0] {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		scope = c[1]
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if s.spent[rt] {
			s.reuse++
		}
		sc, ok := s.refresh[rt]
		if !ok {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(s.refresh, rt)
		s.spent[rt] = true
		scope = sc
	default:
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	at, rt := "at-"+random(), "rt-"+random()
	life := time.Duration(s.expiresIn) * time.Second
	if life == 0 {
		life = time.Hour
	}
	s.access[at] = time.Now().Add(life)
	s.refresh[rt] = scope
	resp := map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "scope": scope}
	if s.expiresIn > 0 {
		resp["expires_in"] = s.expiresIn
	}
	writeJSON(w, 200, resp)
}
