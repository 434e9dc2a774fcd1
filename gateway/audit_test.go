package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// trail opens an audit trail in a temporary directory.
func trail(t *testing.T, o audit.Options) (*audit.Writer, string) {
	t.Helper()
	o.Path = filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w, o.Path
}

// closeTrail closes w, verifies the trail at path and returns its lines.
func closeTrail(t *testing.T, w *audit.Writer, path string) []audit.Line {
	t.Helper()
	require.NoError(t, w.Close(testwait.Context(t)))
	rep, err := audit.Verify(path)
	require.NoError(t, err)
	require.True(t, rep.FromGenesis)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []audit.Line
	for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if s == "" {
			continue
		}
		l, err := audit.DecodeLine([]byte(s))
		require.NoError(t, err)
		out = append(out, l)
	}
	require.Equal(t, rep.Lines, len(out))
	return out
}

// withIdentity serves h with id as the caller of every request, as
// inbound authentication would establish it.
func withIdentity(h http.Handler, id gateway.Identity) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(gateway.WithIdentity(r.Context(), id)))
	})
}

// Every audited action of a real gateway lands in the trail with the
// right fields: calls (ok, tool error, denied by --deny-tools), a prompt,
// a resource read, an admin action through the dashboard, a request
// refused for a wrong token; arguments are absent by default; the trail
// verifies.
func TestGatewayAuditTrail(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a", "-prompts", "1", "-resources", "1")}})
	w, path := trail(t, audit.Options{})
	g := gateway.New(sup, gateway.Options{Audit: w, Token: "s3cret", Deny: []string{"mcp__a__sleep"},
		Parts: []gateway.Part{dashboard.New(dashboard.Options{})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, 5*time.Millisecond) }()
	srv := httptest.NewServer(withIdentity(g.Handler(), gateway.Identity{Subject: "alice", ClientID: "cli-1"}))
	defer srv.Close()
	defer func() { g.Close(); cancel(); testwait.Done(t, done, "Run to return") }()

	c := &rawClient{t: t, url: srv.URL, header: http.Header{"Authorization": {"Bearer s3cret"}}}
	c.initialize()
	call := func(id int, name, args string) string {
		_, body := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
		return body
	}
	assert.Contains(t, call(10, "a__echo", `{"text":"hi","token":"tok-1234567890"}`), `"hi"`)
	assert.Contains(t, call(11, "a__fail", `{}`), `"isError":true`)
	assert.Contains(t, call(12, "a__sleep", `{"ms":1}`), `"code":-32602`)
	_, body := c.post(`{"jsonrpc":"2.0","id":"p1","method":"prompts/get","params":{"name":"a__prompt_1","arguments":{"name":"x"}}}`)
	assert.Contains(t, body, `"messages"`)
	_, body = c.post(`{"jsonrpc":"2.0","id":13,"method":"resources/read","params":{"uri":"mock://resource/1"}}`)
	assert.Contains(t, body, `"contents"`)
	_, body = c.post(`{"jsonrpc":"2.0","id":14,"method":"tools/list"}`) // not audited
	assert.Contains(t, body, `"tools"`)

	// An admin action, through the dashboard's API.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/admin/servers/a/reconnect", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A wrong token.
	bad := &rawClient{t: t, url: srv.URL, header: http.Header{"Authorization": {"Bearer wrong"}}}
	resp, _ = bad.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Metrics count the lines.
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = client.Do(req)
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(metrics), "mcpvisor_audit_lines_total")
	assert.Contains(t, string(metrics), "mcpvisor_audit_dropped_total 0")

	g.Close()
	lines := closeTrail(t, w, path)
	raw, _ := os.ReadFile(path)
	assert.NotContains(t, string(raw), "tok-1234567890", "arguments are never written by default")
	assert.NotContains(t, string(raw), `"arguments"`)
	assert.NotContains(t, string(raw), c.session, "the session id is never written")
	assert.NotContains(t, string(raw), "s3cret")
	assert.NotContains(t, string(raw), "wrong")

	require.Len(t, lines, 7, "%s", raw)
	byAction := map[string][]audit.Line{}
	for i, l := range lines {
		assert.Equal(t, uint64(i+1), l.Seq)
		byAction[l.Action] = append(byAction[l.Action], l)
	}
	calls := byAction[audit.ActionToolsCall]
	require.Len(t, calls, 3)
	ok := calls[0]
	assert.Equal(t, "a", ok.Server)
	assert.Equal(t, "mcp__a__echo", ok.Tool)
	assert.Equal(t, audit.OutcomeOK, ok.Outcome)
	assert.Equal(t, "10", string(ok.RequestID))
	assert.Equal(t, "alice", ok.Subject)
	assert.Equal(t, "cli-1", ok.ClientID)
	assert.NotEmpty(t, ok.Session)
	assert.Positive(t, ok.DurationNs)
	assert.Equal(t, audit.OutcomeToolError, calls[1].Outcome)
	assert.Equal(t, "mcp__a__fail", calls[1].Tool)
	assert.Equal(t, audit.OutcomeRefused, calls[2].Outcome, "a denied tool is a refusal")
	assert.Equal(t, int64(protocol.CodeInvalidParams), calls[2].Code)
	assert.Equal(t, "a__sleep", calls[2].Tool)
	assert.Equal(t, ok.Session, calls[2].Session, "one session, one tag")

	pr := byAction[audit.ActionPromptsGet]
	require.Len(t, pr, 1)
	assert.Equal(t, "mcp__a__prompt_1", pr[0].Prompt)
	assert.Equal(t, "a", pr[0].Server)
	assert.Equal(t, `"p1"`, string(pr[0].RequestID))
	rr := byAction[audit.ActionResourcesRead]
	require.Len(t, rr, 1)
	assert.Equal(t, "mock://resource/1", rr[0].URI)
	assert.Equal(t, "a", rr[0].Server)
	assert.Equal(t, audit.OutcomeOK, rr[0].Outcome)

	adm := byAction[audit.ActionAdmin]
	require.Len(t, adm, 1)
	assert.Equal(t, "reconnect", adm[0].Op)
	assert.Equal(t, "a", adm[0].Server)
	assert.Equal(t, http.StatusOK, adm[0].HTTPStatus)
	assert.Equal(t, "alice", adm[0].Subject)

	ref := byAction[audit.ActionRefused]
	require.Len(t, ref, 1)
	assert.Equal(t, audit.OutcomeRefused, ref[0].Outcome)
	assert.Equal(t, http.StatusUnauthorized, ref[0].HTTPStatus)
	assert.Equal(t, "POST /mcp", ref[0].Op)
	assert.Contains(t, ref[0].Reason, "unauthorized")
	assert.Empty(t, ref[0].Subject, "the checks refused it before any identity")
}

// With --audit-arguments the arguments are in the trail, redacted: a
// secret-looking argument never appears.
func TestGatewayAuditArgumentsRedacted(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	w, path := trail(t, audit.Options{Arguments: true, Results: true})
	g, srv := serve(t, sup, gateway.Options{Audit: w})
	c := &rawClient{t: t, url: srv.URL}
	c.initialize()
	_, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"visible","api_key":"sk-live-0123456789abcdef","auth":{"user":"u","password":"pw-0123456789"}}}}`)
	assert.Contains(t, body, "visible")
	_, body = c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"Bearer abcdefghijklmnopqrstuvwxyz"}}}`)
	assert.Contains(t, body, "Bearer abcdefghijklmnopqrstuvwxyz", "the server saw it")
	g.Close()
	lines := closeTrail(t, w, path)
	raw, _ := os.ReadFile(path)
	for _, s := range []string{"sk-live-0123456789abcdef", "pw-0123456789", "abcdefghijklmnopqrstuvwxyz"} {
		assert.NotContains(t, string(raw), s)
	}
	require.Len(t, lines, 2)
	assert.JSONEq(t, `{"text":"visible","api_key":"[redacted]","auth":"[redacted]"}`, string(lines[0].Arguments))
	assert.Contains(t, string(lines[0].Result), "visible", "results too, with --audit-results")
	assert.JSONEq(t, `{"text":"[redacted]"}`, string(lines[1].Arguments))
	assert.NotContains(t, string(lines[1].Result), "abcdefghij")
}

// Calls from many clients at once make one valid chain, a line each.
func TestGatewayAuditConcurrentCalls(t *testing.T) {
	sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
	w, path := trail(t, audit.Options{})
	g, srv := serve(t, sup, gateway.Options{Audit: w})
	const clients, calls = 4, 25
	var wg sync.WaitGroup
	for i := range clients {
		h := host(t, srv.URL, mcpvisor.Options{})
		wg.Go(func() {
			for j := range calls {
				_, err := h.CallTool(context.Background(), "mcp__gw__a__echo", map[string]any{"text": fmt.Sprintf("%d-%d", i, j)})
				assert.NoError(t, err)
			}
		})
	}
	testwait.Call(t, "the clients' calls", wg.Wait)
	g.Close()
	lines := closeTrail(t, w, path)
	n := 0
	for _, l := range lines {
		if l.Action == audit.ActionToolsCall {
			n++
			assert.Equal(t, audit.OutcomeOK, l.Outcome)
		}
	}
	assert.Equal(t, clients*calls, n)
	assert.Zero(t, w.Stats().Dropped)
}

// A client's answers to approvals are in the trail: approved, declined.
func TestGatewayAuditApprovals(t *testing.T) {
	var fwd gateway.Forwarder
	opts := mcpvisor.Options{Logger: zerolog.Nop(), Permissions: mcpvisor.PermissionRules{Ask: []string{"mcp__*__add"}}}
	fwd.Configure(&opts)
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{"fx": {Config: mockserver.Command("-name", "fx")}},
		mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	w, path := trail(t, audit.Options{})
	g, srv := serve(t, sup, gateway.Options{Audit: w})
	fwd.Attach(g)
	var mu sync.Mutex
	answer := "true"
	h := host(t, srv.URL, mcpvisor.Options{
		Elicitation: func(context.Context, string, *protocol.ElicitParams) (*protocol.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			return &protocol.ElicitResult{Action: protocol.ElicitAccept, Content: map[string]json.RawMessage{"approve": json.RawMessage(answer)}}, nil
		},
	})
	_, err = h.CallTool(t.Context(), "mcp__gw__fx__add", map[string]any{"a": 1, "b": 2})
	require.NoError(t, err)
	mu.Lock()
	answer = "false"
	mu.Unlock()
	_, err = h.CallTool(t.Context(), "mcp__gw__fx__add", map[string]any{"a": 1, "b": 2})
	require.Error(t, err)
	g.Close()
	lines := closeTrail(t, w, path)
	var got []string
	for _, l := range lines {
		switch l.Action {
		case audit.ActionApproval:
			assert.Equal(t, "fx", l.Server)
			assert.Equal(t, "mcp__fx__add", l.Tool)
			assert.NotEmpty(t, l.Session)
			got = append(got, "approval:"+l.Outcome)
		case audit.ActionToolsCall:
			got = append(got, "call:"+l.Outcome)
		}
	}
	// The approval is answered while the call is in flight: its line
	// comes first.
	assert.Equal(t, []string{"approval:approved", "call:ok", "approval:declined", "call:refused"}, got)
}
