package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/management"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// manualClock is the rate limits' clock in tests.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// statelessAnswer is a stateless-era POST's answer.
type statelessAnswer struct {
	status     int
	retryAfter string
	msg        protocol.Message
}

// postStateless sends one stateless-era request (2026-07-28) with the
// bearer token.
func postStateless(t *testing.T, endpoint, token, method, params string) statelessAnswer {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + strings.TrimPrefix(params, "{")
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocol.Version20260728)
	req.Header.Set("Mcp-Method", method)
	var p struct {
		Name *string `json:"name"`
		URI  *string `json:"uri"`
	}
	_ = json.Unmarshal([]byte(params), &p)
	for _, v := range []*string{p.Name, p.URI} {
		if v != nil {
			req.Header.Set("Mcp-Name", *v)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := statelessAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a.msg))
	}
	return a
}

// listedNames lists the tool names of a tools/list answer.
func listedNames(t *testing.T, a statelessAnswer) []string {
	t.Helper()
	require.Nil(t, a.msg.Error, "tools/list: %+v", a.msg.Error)
	var res protocol.ListToolsResult
	require.NoError(t, json.Unmarshal(a.msg.Result, &res))
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

// Access rules and rate limits against a real authorization server
// (node-oidc-provider): two callers in different groups (cc-user in
// team-cc-user, cc-admin in team-cc-admin) each list only their
// servers' tools, through a real MCP client (a supervisor connected to
// the gateway) and by hand; a call outside them is refused with
// CodeAccessDenied (gateway.Refusal → ErrAccessDenied); a client without
// a token is refused 401 by the resource server; cc-user's rate limit
// (burst 3, 1/s) refuses the 4th call with CodeRateLimited, 429 and
// Retry-After, and admits it again once the clock moved on; cc-admin's
// concurrent-call limit (1) refuses a second call while one is held;
// GET /status shows an admin only its servers.
func TestGatewayAccessRules(t *testing.T) {
	ln, resource := loopbackListener(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource, 60, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)

	entered, held := make(chan struct{}, 4), make(chan struct{})
	var f gateway.Features
	require.NoError(t, f.AddTool(gateway.Tool{
		Definition: protocol.Tool{Name: "hold"},
		Handler: func(ctx context.Context, _ json.RawMessage) (*protocol.CallToolResult, error) {
			entered <- struct{}{}
			select {
			case <-held:
			case <-ctx.Done():
			}
			return textResult("held"), nil
		},
	}))
	cfg, err := access.Parse([]byte(`{"rules": [
	  {"match": {"groups": "team-cc-user"}, "servers": {"allow": ["a"]}, "tools": {"deny": ["mcp__a__fail"]},
	   "rateLimit": {"perSecond": 1, "burst": 3}},
	  {"match": {"groups": "team-cc-admin"}, "servers": {"allow": ["b", ""]}, "rateLimit": {"concurrent": 1}}
	]}`))
	require.NoError(t, err)
	policy, err := access.Compile(cfg)
	require.NoError(t, err)
	clk := &manualClock{now: time.Unix(1_000_000, 0)}

	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a", "-prompts", "1", "-resources", "1")},
		"b": {Config: mockserver.Command("-name", "b", "-prompts", "1", "-resources", "1")},
	})
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer}, Scopes: []string{"mcp:tools"}}
	w, trailPath := trail(t, audit.Options{})
	srv := serveOn(t, sup, gateway.Options{Features: &f, ResourceServer: rs, Access: policy, AccessNow: clk.Now, Audit: w}, ln)

	user := ccToken(t, issuer, "cc-user", resource, "mcp:tools")
	admin := ccToken(t, issuer, "cc-admin", resource, "mcp:tools mcpvisor:admin")

	t.Run("each sees its own", func(t *testing.T) {
		for _, tc := range []struct {
			token string
			want  []string
		}{
			{user, []string{"mcp__gw__a__add", "mcp__gw__a__announce", "mcp__gw__a__echo", "mcp__gw__a__sleep"}},
			{admin, []string{"mcp__gw__b__add", "mcp__gw__b__announce", "mcp__gw__b__echo", "mcp__gw__b__fail", "mcp__gw__b__sleep", "mcp__gw__hold",
				"mcp__gw__wait_for_channel_message"}}, // the gateway's own tools are the server ""
		} {
			host := upstream(t, map[string]mcpvisor.ServerConfig{"gw": {Config: transports.Config{Type: "http", URL: resource,
				Headers: map[string]string{"Authorization": "Bearer " + tc.token}}}})
			require.Equal(t, mcpvisor.StateReady, host.Status()[0].State, host.Status()[0].LastError)
			got := names(host.Tools())
			slices.Sort(got)
			assert.Equal(t, tc.want, got)
		}
		assert.Equal(t, []string{"a__add", "a__announce", "a__echo", "a__sleep"},
			listedNames(t, postStateless(t, resource, user, "tools/list", "")))
	})
	t.Run("calls outside are refused", func(t *testing.T) {
		for _, tc := range []struct{ token, tool string }{{user, "b__echo"}, {user, "a__fail"}, {user, "hold"}, {admin, "a__echo"}} {
			a := postStateless(t, resource, tc.token, "tools/call", `{"name":"`+tc.tool+`","arguments":{"text":"x"}}`)
			require.NotNil(t, a.msg.Error, tc.tool)
			assert.Equal(t, int64(gateway.CodeAccessDenied), a.msg.Error.Code, tc.tool)
			assert.Contains(t, a.msg.Error.Message, `tool "`+tc.tool+`" is not allowed`)
			assert.ErrorIs(t, gateway.Refusal(a.msg.Error), gateway.ErrAccessDenied)
		}
		a := postStateless(t, resource, user, "prompts/get", `{"name":"b__prompt_1","arguments":{"name":"x"}}`)
		require.NotNil(t, a.msg.Error)
		assert.Equal(t, int64(gateway.CodeAccessDenied), a.msg.Error.Code)
		a = postStateless(t, resource, user, "prompts/get", `{"name":"a__prompt_1","arguments":{"name":"x"}}`)
		assert.Nil(t, a.msg.Error, "its own server's prompt")
		// Both servers list mock://resource/1; a's is read (the first by
		// name), which cc-admin may not use.
		a = postStateless(t, resource, admin, "resources/read", `{"uri":"mock://resource/1"}`)
		require.NotNil(t, a.msg.Error)
		assert.Equal(t, int64(gateway.CodeAccessDenied), a.msg.Error.Code)
	})
	t.Run("anonymous", func(t *testing.T) {
		a := postStateless(t, resource, "", "tools/list", "")
		assert.Equal(t, http.StatusUnauthorized, a.status)
	})
	t.Run("rate limit", func(t *testing.T) {
		call := func() statelessAnswer {
			return postStateless(t, resource, user, "tools/call", `{"name":"a__echo","arguments":{"text":"x"}}`)
		}
		clk.Add(time.Hour) // the bucket full again (the prompt above took a token)
		for i := range 3 {
			a := call()
			require.Nil(t, a.msg.Error, "call %d within the burst: %+v", i, a.msg.Error)
		}
		a := call()
		require.NotNil(t, a.msg.Error)
		assert.Equal(t, int64(gateway.CodeRateLimited), a.msg.Error.Code)
		assert.JSONEq(t, `{"reason":"rate","retryAfterMs":1000,"retryable":true}`, string(a.msg.Error.Data))
		assert.Equal(t, http.StatusTooManyRequests, a.status)
		assert.Equal(t, "1", a.retryAfter)
		err := gateway.Refusal(a.msg.Error)
		var le *access.LimitError
		require.ErrorAs(t, err, &le)
		assert.ErrorIs(t, err, gateway.ErrRateLimited)
		assert.Equal(t, time.Second, le.RetryAfter)

		clk.Add(999 * time.Millisecond)
		assert.Equal(t, int64(gateway.CodeRateLimited), call().msg.Error.Code, "not yet")
		clk.Add(time.Millisecond)
		a = call()
		assert.Nil(t, a.msg.Error, "allowed again after the wait it said")
		assert.Equal(t, http.StatusOK, a.status)
	})
	t.Run("concurrent calls", func(t *testing.T) {
		done := make(chan statelessAnswer, 1)
		go func() { done <- postStateless(t, resource, admin, "tools/call", `{"name":"hold"}`) }()
		testwait.Recv(t, entered, "the first call to be in flight")
		a := postStateless(t, resource, admin, "tools/call", `{"name":"b__echo","arguments":{"text":"x"}}`)
		require.NotNil(t, a.msg.Error)
		assert.Equal(t, int64(gateway.CodeRateLimited), a.msg.Error.Code)
		assert.Contains(t, string(a.msg.Error.Data), `"reason":"concurrent"`)
		assert.Equal(t, http.StatusTooManyRequests, a.status)
		clk.Add(time.Second) // cc-user's bucket, emptied above, has a token again
		a = postStateless(t, resource, user, "tools/call", `{"name":"a__echo","arguments":{"text":"x"}}`)
		assert.Nil(t, a.msg.Error, "another caller is not concerned")
		close(held)
		first := testwait.Recv(t, done, "the held call")
		assert.Nil(t, first.msg.Error)
		a = postStateless(t, resource, admin, "tools/call", `{"name":"b__echo","arguments":{"text":"x"}}`)
		assert.Nil(t, a.msg.Error, "the slot is free again")
	})
	t.Run("status", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/status", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var rep gateway.StatusReport
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		var servers []string
		for _, s := range rep.Servers {
			servers = append(servers, s.Name)
		}
		assert.Equal(t, []string{"b"}, servers)
		assert.Equal(t, 5, rep.Tools, "b's tools")
	})
	t.Run("audit", func(t *testing.T) {
		// The refusals are on the audit trail as refused, with the caller,
		// the server and the pool name (docs/audit.md).
		refused := map[int64][]string{}
		for _, l := range closeTrail(t, w, trailPath) {
			if l.Code == gateway.CodeAccessDenied || l.Code == gateway.CodeRateLimited {
				assert.Equal(t, audit.OutcomeRefused, l.Outcome, "%+v", l)
				refused[l.Code] = append(refused[l.Code], l.Subject+" "+l.Server+" "+l.Tool)
			}
		}
		assert.Contains(t, refused[gateway.CodeAccessDenied], "cc-user b mcp__b__echo")
		assert.Contains(t, refused[gateway.CodeRateLimited], "cc-user a mcp__a__echo")
		assert.Contains(t, refused[gateway.CodeRateLimited], "cc-admin b mcp__b__echo")
	})
}

// The management tools (the pool's built-ins) are admin actions once a
// rule sets admin: hidden from and refused to a caller that is not an
// admin (cc-user; cc-admin without the admin scope), offered to one with
// the admin scope whom an admin rule matches, and to the static token
// (the operator), whom no rule restricts.
func TestGatewayAccessAdminTools(t *testing.T) {
	ln, resource := loopbackListener(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource, 60, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)
	var managed atomic.Pointer[mcpvisor.Supervisor]
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop(), Builtins: management.Tools(managed.Load)})
	require.NoError(t, err)
	managed.Store(sup)
	t.Cleanup(func() { assert.NoError(t, sup.Close(testwait.Context(t))) })
	_, err = sup.SetServers(testwait.Context(t), map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}},
		mcpvisor.AwaitSettled(testwait.Patience))
	require.NoError(t, err)

	cfg, err := access.Parse([]byte(`[
	  {"match": {"groups": "team-cc-*"}, "servers": {"allow": ["a"]}},
	  {"match": {"groups": "team-cc-admin"}, "admin": true}
	]`))
	require.NoError(t, err)
	policy, err := access.Compile(cfg)
	require.NoError(t, err)
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer}, Scopes: []string{"mcp:tools"}}
	serveOn(t, sup, gateway.Options{ResourceServer: rs, Access: policy, Token: "the-static-token"}, ln)

	user := ccToken(t, issuer, "cc-user", resource, "mcp:tools")
	adminNoScope := ccToken(t, issuer, "cc-admin", resource, "mcp:tools")
	admin := ccToken(t, issuer, "cc-admin", resource, "mcp:tools mcpvisor:admin")
	for _, tc := range []struct {
		who, token string
		admin      bool
	}{{"cc-user", user, false}, {"cc-admin without the scope", adminNoScope, false}, {"cc-admin", admin, true}, {"the static token", "the-static-token", true}} {
		listed := listedNames(t, postStateless(t, resource, tc.token, "tools/list", ""))
		assert.Contains(t, listed, "a__echo", tc.who)
		assert.Equal(t, tc.admin, slices.Contains(listed, "ListMcpResources"), tc.who)
		a := postStateless(t, resource, tc.token, "tools/call", `{"name":"ListMcpResources","arguments":{}}`)
		if tc.admin {
			assert.Nil(t, a.msg.Error, tc.who)
		} else {
			require.NotNil(t, a.msg.Error, tc.who)
			assert.Equal(t, int64(gateway.CodeAccessDenied), a.msg.Error.Code, tc.who)
		}
	}
}
