package oauth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAS is an MCP resource and its authorization server on one loopback
// httptest server, configurable for the traps of discovery and the token
// lifecycle. Every request is logged.
type fakeAS struct {
	t   *testing.T
	srv *httptest.Server

	// Configuration (set before use).
	mcpPath       string   // the MCP endpoint, default /mcp
	issuerPath    string   // "" or e.g. /tenant1
	prmAt         string   // "path" (default), "root", "custom" (only in the header), "none"
	prmInHeader   bool     // resource_metadata in the challenge
	prmResource   string   // override of the PRM resource
	prmScopes     []string // scopes_supported of the PRM
	challengeScp  string   // scope in the challenge
	asAt          string   // "oauth" (default, RFC 8414 path-inserted), "oidc-insert", "oidc-append", "none"
	asIssuer      string   // override of the issuer in the metadata
	noPKCE        bool     // omit code_challenge_methods_supported
	asScopes      []string // AS scopes_supported
	cimd          bool
	noDCR         bool
	authMethods   []string        // token_endpoint_auth_methods_supported
	issSupported  bool            // authorization_response_iss_parameter_supported
	sendIss       string          // "" = the issuer when issSupported; "-" = never; else this value
	expiresIn     int             // 0: omit expires_in
	rotate        bool            // rotate refresh tokens (old ones become invalid)
	down          bool            // every AS endpoint answers 503
	requireScopes []string        // the MCP endpoint answers 403 insufficient_scope without these
	grantOnly     string          // when set, every token is granted this scope whatever was asked
	error200      bool            // the token endpoint answers errors with HTTP 200
	known         map[string]bool // registered client ids; nil: any client is accepted
	grantTypes    []string        // grant_types_supported; nil: omitted
	assertion     string          // the jwt-bearer assertion accepted (others: invalid_grant)
	prmIssuers    []string        // authorization_servers of the PRM; nil: this server's issuer
	trust         *fakeAS         // another authorization server whose tokens the resource accepts
	refuseOwn     bool            // the resource refuses this server's own tokens (it moved to trust)
	dpop          dpopFake        // DPoP settings and observations (dpop_test.go)
	subjects      map[string]bool // the subject tokens the token exchange accepts
	issuedType    string          // issued_token_type of an exchange; "": access_token

	mu        sync.Mutex
	log       []string            // "METHOD path"
	codes     map[string]codeInfo // code → what was authorized
	access    map[string]string   // access token → granted scope
	refresh   map[string]string   // live refresh token → scope
	spent     map[string]bool     // refresh tokens used
	reuse     int                 // refresh tokens presented twice
	tokenReqs []url.Values
	authHdrs  []string // Authorization headers of token requests
	regs      []map[string]any
	authReqs  []url.Values
	n         int
}

type codeInfo struct {
	challenge, scope, resource, redirect string
}

func newFakeAS(t *testing.T, configure func(*fakeAS)) *fakeAS {
	f := &fakeAS{t: t, mcpPath: "/mcp", prmAt: "path", prmInHeader: true, asAt: "oauth", expiresIn: 3600, rotate: true,
		codes: map[string]codeInfo{}, access: map[string]string{}, refresh: map[string]string{}, spent: map[string]bool{},
		dpop: dpopFake{bound: map[string]string{}, jtis: map[string]bool{}}}
	if configure != nil {
		configure(f)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAS) url() string    { return f.srv.URL }
func (f *fakeAS) mcpURL() string { return f.srv.URL + f.mcpPath }
func (f *fakeAS) issuer() string { return f.srv.URL + f.issuerPath }
func (f *fakeAS) prmURL() string {
	switch f.prmAt {
	case "root":
		return f.srv.URL + "/.well-known/oauth-protected-resource"
	case "custom":
		return f.srv.URL + "/custom/prm.json"
	}
	return f.srv.URL + "/.well-known/oauth-protected-resource" + f.mcpPath
}

func (f *fakeAS) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *fakeAS) count(prefix string) int {
	n := 0
	for _, r := range f.requests() {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeAS) next(prefix string) string {
	f.n++
	return fmt.Sprintf("%s-%d-%d", prefix, f.n, time.Now().UnixNano())
}

func (f *fakeAS) metadata() map[string]any {
	iss := f.issuer()
	if f.asIssuer != "" {
		iss = f.asIssuer
	}
	base := f.srv.URL + f.issuerPath
	md := map[string]any{
		"issuer":                   iss,
		"authorization_endpoint":   base + "/authorize",
		"token_endpoint":           base + "/token",
		"response_types_supported": []string{"code"},
	}
	if !f.noDCR {
		md["registration_endpoint"] = base + "/register"
	}
	if !f.noPKCE {
		md["code_challenge_methods_supported"] = []string{"S256"}
	}
	if f.asScopes != nil {
		md["scopes_supported"] = f.asScopes
	}
	if f.cimd {
		md["client_id_metadata_document_supported"] = true
	}
	if f.authMethods != nil {
		md["token_endpoint_auth_methods_supported"] = f.authMethods
	}
	if f.issSupported {
		md["authorization_response_iss_parameter_supported"] = true
	}
	if f.grantTypes != nil {
		md["grant_types_supported"] = f.grantTypes
	}
	if f.dpop.algs != nil {
		md["dpop_signing_alg_values_supported"] = f.dpop.algs
	}
	return md
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeAS) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.log = append(f.log, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == f.mcpPath:
		f.serveMCP(w, r)
		return
	case f.prmAt != "none" && p == strings.TrimPrefix(f.prmURL(), f.srv.URL):
		res := f.mcpURL()
		if f.prmAt == "root" {
			res = f.srv.URL
		}
		if f.prmResource != "" {
			res = f.prmResource
		}
		f.mu.Lock()
		issuers := f.prmIssuers
		f.mu.Unlock()
		if issuers == nil {
			issuers = []string{f.issuer()}
		}
		doc := map[string]any{"resource": res, "authorization_servers": issuers}
		if f.prmScopes != nil {
			doc["scopes_supported"] = f.prmScopes
		}
		writeJSON(w, 200, doc)
		return
	}
	if f.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	asPaths := map[string]string{
		"oauth":       "/.well-known/oauth-authorization-server" + f.issuerPath,
		"oidc-insert": "/.well-known/openid-configuration" + f.issuerPath,
		"oidc-append": f.issuerPath + "/.well-known/openid-configuration",
	}
	if want, ok := asPaths[f.asAt]; ok && p == want {
		writeJSON(w, 200, f.metadata())
		return
	}
	base := f.issuerPath
	switch p {
	case base + "/register":
		if f.noDCR {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.regs = append(f.regs, body)
		id := f.next("client")
		body["_client_id"] = id // the id issued, for the tests
		f.mu.Unlock()
		if f.known != nil {
			f.known[id] = true
		}
		resp := map[string]any{"client_id": id, "redirect_uris": body["redirect_uris"]}
		if m, _ := body["token_endpoint_auth_method"].(string); m != "none" && m != "" {
			resp["client_secret"] = "secret-" + id
			resp["token_endpoint_auth_method"] = m
		} else {
			resp["token_endpoint_auth_method"] = "none"
		}
		writeJSON(w, 201, resp)
	case base + "/authorize":
		q := r.URL.Query()
		f.mu.Lock()
		f.authReqs = append(f.authReqs, q)
		code := f.next("code")
		f.codes[code] = codeInfo{challenge: q.Get("code_challenge"), scope: q.Get("scope"), resource: q.Get("resource"), redirect: q.Get("redirect_uri")}
		f.mu.Unlock()
		to, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect", 400)
			return
		}
		rq := to.Query()
		rq.Set("code", code)
		rq.Set("state", q.Get("state"))
		switch {
		case f.sendIss == "-":
		case f.sendIss != "":
			rq.Set("iss", f.sendIss)
		case f.issSupported:
			rq.Set("iss", f.issuer())
		}
		to.RawQuery = rq.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	case base + "/token":
		f.serveToken(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAS) serveToken(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokenReqs = append(f.tokenReqs, r.PostForm)
	f.authHdrs = append(f.authHdrs, r.Header.Get("Authorization"))
	if f.known != nil && !f.known[r.PostForm.Get("client_id")] {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	if f.error200 {
		writeJSON(w, 200, map[string]string{"error": "invalid_grant", "error_description": "expired"})
		return
	}
	// The proof first: a nonce demanded must not cost the code.
	jkt, bad := f.dpopTokenRequest(w, r)
	if bad {
		return
	}
	var scope string
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		ci, ok := f.codes[r.PostForm.Get("code")]
		delete(f.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != ci.challenge || ci.redirect != r.PostForm.Get("redirect_uri") {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		scope = ci.scope
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if f.spent[rt] {
			f.reuse++
		}
		s, ok := f.refresh[rt]
		if !ok {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		scope = s
		if f.rotate {
			delete(f.refresh, rt)
			f.spent[rt] = true
		}
	case "client_credentials":
		scope = r.PostForm.Get("scope")
	case GrantJWTBearer:
		if r.PostForm.Get("assertion") != f.assertion {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "bad assertion"})
			return
		}
		scope = r.PostForm.Get("scope")
	case GrantTokenExchange:
		if sub := r.PostForm.Get("subject_token"); !f.subjects[sub] {
			// (Echoing the token: the client must not repeat it.)
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "subject token " + sub + " expired"})
			return
		}
		scope = r.PostForm.Get("scope")
	default:
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if f.grantOnly != "" {
		scope = f.grantOnly
	}
	at := f.next("access")
	f.access[at] = scope
	resp := map[string]any{"access_token": at, "token_type": "Bearer", "scope": scope}
	if jkt != "" {
		f.dpop.bound[at] = jkt
		resp["token_type"] = "DPoP"
	}
	if f.expiresIn > 0 {
		resp["expires_in"] = f.expiresIn
	}
	if r.PostForm.Get("grant_type") == GrantTokenExchange {
		resp["issued_token_type"] = TokenTypeAccessToken
		if f.issuedType != "" {
			resp["issued_token_type"] = f.issuedType
		}
	}
	if g := r.PostForm.Get("grant_type"); g != "client_credentials" && g != GrantJWTBearer {
		rt := r.PostForm.Get("refresh_token")
		if f.rotate || rt == "" {
			rt = f.next("refresh")
		}
		f.refresh[rt] = scope
		resp["refresh_token"] = rt
	}
	writeJSON(w, 200, resp)
}

func (f *fakeAS) serveMCP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if f.dpopResource(w, r) {
		return // answered (a DPoP-bound token, or the DPoP challenge)
	}
	f.mu.Lock()
	scope, ok := f.access[strings.TrimPrefix(auth, "Bearer ")]
	if ok && f.refuseOwn {
		ok = false
	}
	f.mu.Unlock()
	if !ok && f.trust != nil {
		f.trust.mu.Lock()
		scope, ok = f.trust.access[strings.TrimPrefix(auth, "Bearer ")]
		f.trust.mu.Unlock()
	}
	challenge := `Bearer error="invalid_token"`
	if f.prmInHeader || f.prmAt == "custom" {
		challenge += fmt.Sprintf(`, resource_metadata="%s"`, f.prmURL())
	}
	if f.challengeScp != "" {
		challenge += fmt.Sprintf(`, scope="%s"`, f.challengeScp)
	}
	if !strings.HasPrefix(auth, "Bearer ") || !ok {
		w.Header().Set("WWW-Authenticate", challenge)
		writeJSON(w, 401, map[string]string{"error": "invalid_token"})
		return
	}
	granted := strings.Fields(scope)
	for _, s := range f.requireScopes {
		found := false
		for _, g := range granted {
			found = found || g == s
		}
		if !found {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s", resource_metadata="%s"`, strings.Join(f.requireScopes, " "), f.prmURL()))
			writeJSON(w, 403, map[string]string{"error": "insufficient_scope"})
			return
		}
	}
	writeJSON(w, 200, map[string]string{"ok": "yes"})
}

// purgeClients forgets every registered client (and their tokens).
func (f *fakeAS) purgeClients() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known = map[string]bool{}
	f.access = map[string]string{}
	f.refresh = map[string]string{}
}

// revokeAll forgets every token (the user revoked the grant).
func (f *fakeAS) revokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.access = map[string]string{}
	f.refresh = map[string]string{}
}

// expireAccess invalidates the access tokens only.
func (f *fakeAS) expireAccess() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.access = map[string]string{}
}

// regsClientID returns the client id issued to the i-th registration.
func (f *fakeAS) regsClientID(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.regs) {
		return ""
	}
	id, _ := f.regs[i]["_client_id"].(string)
	return id
}
