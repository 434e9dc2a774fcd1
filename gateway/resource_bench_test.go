package gateway_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
)

// BenchmarkGatewayAuth measures one tools/call served by the gateway's
// HTTP handler in process, side by side: with the static token, and as a
// resource server validating an RS256 or ES256 JWT access token (keys
// cached), its signature verified at every call ("verified") or once,
// then remembered (the default VerifiedCache, "cached"). The difference
// is the CPU the token validation adds per call.
func BenchmarkGatewayAuth(b *testing.B) {
	const resource = "https://gw.example/mcp"
	is := oauthtest.NewIssuer()
	defer is.Close()
	jwtToken := func(alg string) string {
		return is.Token(alg, map[string]any{"iss": is.URL, "aud": resource, "sub": "alice", "client_id": "app",
			"scope": "mcp:tools", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()})
	}
	rs := func(verifiedCache time.Duration) *gateway.ResourceServer {
		v, err := authn.New(authn.Options{Issuer: is.URL, Audience: resource, VerifiedCache: verifiedCache})
		if err != nil {
			b.Fatal(err)
		}
		return &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{is.URL}, Scopes: []string{"mcp:tools"}}
	}
	b.Run("static", func(b *testing.B) {
		benchAuthHandler(b, gateway.Options{Token: "a-static-token-of-32-characters!"}, "a-static-token-of-32-characters!")
	})
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run("jwt-"+alg+"-verified", func(b *testing.B) { benchAuthHandler(b, gateway.Options{ResourceServer: rs(-1)}, jwtToken(alg)) })
		b.Run("jwt-"+alg+"-cached", func(b *testing.B) { benchAuthHandler(b, gateway.Options{ResourceServer: rs(0)}, jwtToken(alg)) })
	}
}

// authStub is stubBackend with no prompts (the names index lists them).
type authStub struct{ stubBackend }

func (authStub) ListPrompts(string) ([]mcpvisor.Prompt, error) { return nil, nil }

// benchAuthHandler is benchHandler with a bearer token on every request.
func benchAuthHandler(b *testing.B, opts gateway.Options, token string) {
	g, _ := serve(b, authStub{}, opts)
	h := g.Handler()
	send := func(body string, sid string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, gateway.MCPPath, bytes.NewReader([]byte(body)))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, "")
	sid := rec.Header().Get("Mcp-Session-Id")
	if sid == "" {
		b.Fatal("no session: ", rec.Code, rec.Body.String())
	}
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef"}}}`
	b.ReportAllocs()
	for b.Loop() {
		if rec := send(body, sid); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "0123456789abcdef") {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
