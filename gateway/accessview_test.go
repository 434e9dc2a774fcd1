package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// viewRules give cc-user (group team-cc-user) the servers a and fx, and
// cc-admin (team-cc-admin) b and the gateway's own, as an admin.
const viewRules = `[
  {"match": {"groups": "team-cc-user"}, "servers": {"allow": ["a", "fx"]}},
  {"match": {"groups": "team-cc-admin"}, "servers": {"allow": ["b", ""]}, "admin": true}
]`

// viewOperatorToken is the fixture's static token: the operator's.
const viewOperatorToken = "the-operator-token"

// viewFixture is a gateway behind a real authorization server
// (node-oidc-provider) with viewRules, over the servers a and b (mock
// servers with prompts, the notify tool and channels; a with resources
// and subscriptions) and fx (the conformance fixtures: tasks,
// completions, skills), with the dashboard.
type viewFixture struct {
	g        *gateway.Gateway
	base     string // the listener's URL
	resource string // the MCP endpoint's
	issuer   string
	user     string // cc-user's access token (mcp:tools)
	admin    string // cc-admin's (mcp:tools mcpvisor:admin)
}

func newViewFixture(t *testing.T) *viewFixture {
	t.Helper()
	ln, resource := loopbackListener(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource, 300, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)
	cfg, err := access.Parse([]byte(viewRules))
	require.NoError(t, err)
	policy, err := access.Compile(cfg)
	require.NoError(t, err)

	var fwd gateway.Forwarder
	o := mcpvisor.Options{Logger: zerolog.Nop()}
	fwd.Configure(&o)
	sup, err := mcpvisor.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sup.Close(testwait.Context(t))) })
	_, err = sup.SetServers(testwait.Context(t), map[string]mcpvisor.ServerConfig{
		"a":  {Config: mockserver.Command("-name", "a", "-prompts", "1", "-resources", "1", "-subscribe", "-notify-tool", "-channel")},
		"b":  {Config: mockserver.Command("-name", "b", "-prompts", "1", "-notify-tool", "-channel")},
		"fx": fixtures(),
	}, mcpvisor.AwaitSettled(testwait.Patience))
	require.NoError(t, err)
	for _, st := range sup.Status() {
		require.Equal(t, mcpvisor.StateReady, st.State, "%s: %s", st.Name, st.LastError)
	}
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer}, Scopes: []string{"mcp:tools"}}
	g := gateway.New(sup, gateway.Options{ResourceServer: rs, Access: policy, Token: viewOperatorToken,
		Parts: []gateway.Part{dashboard.New(dashboard.Options{})}})
	fwd.Attach(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, 5*time.Millisecond)
	}()
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	return &viewFixture{g: g, base: srv.URL, resource: resource, issuer: issuer,
		user:  ccToken(t, issuer, "cc-user", resource, "mcp:tools"),
		admin: ccToken(t, issuer, "cc-admin", resource, "mcp:tools mcpvisor:admin")}
}

// call sends a stateless-era request with token.
func (f *viewFixture) call(t *testing.T, token, caps, method, params string) answer {
	t.Helper()
	c := newStatelessClient(t, f.base, caps)
	return c.raw(method, c.params(params), map[string]string{"Authorization": "Bearer " + token})
}

// get sends GET path with token and returns the status and body.
func (f *viewFixture) get(t *testing.T, token, path string) (int, string) {
	t.Helper()
	return f.do(t, http.MethodGet, token, path)
}

func (f *viewFixture) do(t *testing.T, method, token, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// stream opens GET path (an event stream) with token.
func (f *viewFixture) stream(t *testing.T, token, path string) *testwait.LineReader {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := streamClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
	return testwait.NewLineReader(t, resp.Body)
}

// refused asserts a is the access rules' refusal.
func refused(t *testing.T, a answer, what string) {
	t.Helper()
	require.NotNil(t, a.msg.Error, "%s: want a refusal, got %s", what, a.raw)
	assert.Equal(t, int64(gateway.CodeAccessDenied), a.msg.Error.Code, "%s: %s", what, a.raw)
	assert.ErrorIs(t, gateway.Refusal(a.msg.Error), gateway.ErrAccessDenied, what)
}

// Two callers with different access rules (cc-user: a and fx; cc-admin:
// b and the gateway's own, as an admin), from a real authorization
// server, each see only their servers on every surface: completions,
// tasks (a task is its creator's), skills, log and channel
// notifications (handshake-era sessions and stateless listen streams),
// wait_for_channel_message, GET /status's gateway-wide figures,
// /events, /metrics, and the dashboard's data, stream and actions.
func TestAccessViewEverySurface(t *testing.T) {
	f := newViewFixture(t)
	// The dashboard's feed, which keeps the channel messages for its
	// channel view, starts with its first view.
	status, body := f.get(t, f.admin, "/admin/channels")
	require.Equal(t, http.StatusOK, status, body)
	const withTasksCaps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

	t.Run("lists", func(t *testing.T) {
		// Filtered before this change too; here for the whole picture.
		res := f.call(t, f.admin, `{}`, "resources/list", "").result(t)
		assert.NotContains(t, string(res["resources"]), "mock://resource/1")
		assert.NotContains(t, string(res["resources"]), "test://")
		res = f.call(t, f.user, `{}`, "resources/list", "").result(t)
		assert.Contains(t, string(res["resources"]), "mock://resource/1")
		res = f.call(t, f.admin, `{}`, "prompts/list", "").result(t)
		assert.Contains(t, string(res["prompts"]), "b__prompt_1")
		assert.NotContains(t, string(res["prompts"]), "a__prompt_1")
		assert.NotContains(t, string(res["prompts"]), "test_prompt")
		refused(t, f.call(t, f.admin, `{}`, "resources/read", `{"uri":"mock://resource/1"}`), "another's resource")
	})

	t.Run("completion", func(t *testing.T) {
		ref := `{"ref":{"type":"ref/prompt","name":"fx__test_prompt_with_arguments"},"argument":{"name":"arg1","value":"pa"}}`
		res := f.call(t, f.user, `{}`, "completion/complete", ref).result(t)
		assert.Contains(t, string(res["completion"]), `"paris"`)
		refused(t, f.call(t, f.admin, `{}`, "completion/complete", ref), "a completion of another's prompt")
		tpl := `{"ref":{"type":"ref/resource","uri":"mock://template/{id}"},"argument":{"name":"id","value":"1"}}`
		refused(t, f.call(t, f.admin, `{}`, "completion/complete", tpl), "a completion of another's template")
	})

	t.Run("tasks", func(t *testing.T) {
		created := f.call(t, f.user, withTasksCaps, "tools/call", `{"name":"fx__slow_compute","arguments":{"seconds":60}}`).result(t)
		require.Equal(t, `"task"`, string(created["resultType"]))
		var id string
		require.NoError(t, json.Unmarshal(created["taskId"], &id))
		require.True(t, strings.HasPrefix(id, "fx/"), id)
		got := f.call(t, f.user, withTasksCaps, "tasks/get", `{"taskId":"`+id+`"}`).result(t)
		assert.JSONEq(t, `"`+id+`"`, string(got["taskId"]), "its creator follows it")

		// Another caller may neither read nor cancel it, by its id or by
		// the server's own.
		_, rest, _ := strings.Cut(id, "/")
		serverID := rest[strings.LastIndex(rest, "/")+1:]
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			a := f.call(t, f.admin, withTasksCaps, method, `{"taskId":"`+id+`"}`)
			refused(t, a, method+" of another's task")
			assert.Contains(t, string(a.msg.Error.Data), `"reason":"owner"`)
			a = f.call(t, f.admin, withTasksCaps, method, `{"taskId":"fx/`+serverID+`"}`)
			require.NotNil(t, a.msg.Error, "%s by the server's task id: %s", method, a.raw)
		}
		still := f.call(t, f.user, withTasksCaps, "tasks/get", `{"taskId":"`+id+`"}`).result(t)
		assert.NotEqual(t, `"cancelled"`, string(still["status"]), "nobody else cancelled it")

		// Once the rules take fx from cc-user, its own task is refused too.
		cfg, err := access.Parse([]byte(strings.Replace(viewRules, `["a", "fx"]`, `["a"]`, 1)))
		require.NoError(t, err)
		narrower, err := access.Compile(cfg)
		require.NoError(t, err)
		wider, err := access.Compile(mustParse(t, viewRules))
		require.NoError(t, err)
		f.g.SetAccess(narrower)
		defer f.g.SetAccess(wider)
		a := f.call(t, f.user, withTasksCaps, "tasks/get", `{"taskId":"`+id+`"}`)
		refused(t, a, "a task of a server no longer allowed")
		assert.Contains(t, string(a.msg.Error.Data), `"reason":"access"`)
		f.g.SetAccess(wider)
		f.call(t, f.user, withTasksCaps, "tasks/cancel", `{"taskId":"`+id+`"}`).result(t)
	})

	t.Run("skills", func(t *testing.T) {
		list := f.call(t, f.user, `{}`, "skills/list", "").result(t)
		assert.Contains(t, string(list["skills"]), "skill://mcpvisor/demo-skill/SKILL.md")
		list = f.call(t, f.admin, `{}`, "skills/list", "").result(t)
		assert.JSONEq(t, `[]`, string(list["skills"]), "fx's skills are not cc-admin's")
		a := f.call(t, f.admin, `{}`, "skills/get", `{"uri":"skill://mcpvisor/demo-skill/SKILL.md"}`)
		assert.Equal(t, int64(protocol.CodeInvalidParams), a.code(t), "no server of cc-admin serves it")
	})

	// The sessions below stay open for the status subtest.
	userSession := &rawClient{t: t, url: f.base, header: http.Header{"Authorization": {"Bearer " + f.user}}}
	adminSession := &rawClient{t: t, url: f.base, header: http.Header{"Authorization": {"Bearer " + f.admin}}}

	t.Run("session notifications", func(t *testing.T) {
		for _, c := range []*rawClient{userSession, adminSession} {
			resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
				`"capabilities":{"experimental":{"claude/channel":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			c.session = resp.Header.Get("Mcp-Session-Id")
			resp, _ = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			require.Equal(t, http.StatusAccepted, resp.StatusCode)
		}
		userStream := sessionStream(t, f.base, userSession)
		adminStream := sessionStream(t, f.base, adminSession)

		// b's log message and channel message first, then a's: each
		// stream's first of each is its own server's.
		for _, step := range []struct{ token, server string }{{f.admin, "b"}, {f.user, "a"}} {
			f.call(t, step.token, `{}`, "tools/call", `{"name":"`+step.server+`__notify","arguments":{"method":"notifications/message",`+
				`"params":{"level":"warning","data":"log of `+step.server+`"}}}`).result(t)
			f.call(t, step.token, `{}`, "tools/call", `{"name":"`+step.server+`__channel_burst","arguments":{"n":1,"prefix":"chan of `+step.server+` "}}`).result(t)
		}
		for _, tc := range []struct {
			stream       *testwait.LineReader
			mine, theirs string
		}{{userStream, "a", "b"}, {adminStream, "b", "a"}} {
			seen := map[string]string{}
			for len(seen) < 2 {
				ev := tc.stream.Event("the session's log and channel messages")
				m, err := protocol.Decode([]byte(ev.Data))
				require.NoError(t, err)
				switch m.Method {
				case protocol.NotificationMessage, protocol.NotificationChannel:
					if _, dup := seen[m.Method]; !dup {
						seen[m.Method] = string(m.Params)
					}
				}
			}
			assert.Contains(t, seen[protocol.NotificationMessage], "log of "+tc.mine)
			assert.Contains(t, seen[protocol.NotificationChannel], "chan of "+tc.mine)
			assert.NotContains(t, seen[protocol.NotificationMessage], "log of "+tc.theirs)
			assert.NotContains(t, seen[protocol.NotificationChannel], "chan of "+tc.theirs)
		}
	})

	t.Run("wait for channel messages", func(t *testing.T) {
		// Both a's and b's messages are queued (above); cc-admin, who may
		// use the gateway's own wait tool, takes b's only.
		res := f.call(t, f.admin, `{}`, "tools/call", `{"name":"wait_for_channel_message","arguments":{"timeout_seconds":0,"max_messages":100}}`).result(t)
		var out struct {
			Messages []struct {
				Server string `json:"server"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(res["structuredContent"], &out))
		require.NotEmpty(t, out.Messages)
		for _, m := range out.Messages {
			assert.Equal(t, "b", m.Server)
		}
	})

	t.Run("listen notifications", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Patience)
		defer cancel()
		events := listenWith(t, ctx, f.base, f.user, `{"resourceSubscriptions":["mock://resource/1"]}`, "info")
		nextMethod(t, events, protocol.NotificationSubscriptionsAck)
		f.call(t, f.admin, `{}`, "tools/call", `{"name":"b__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"listen log of b"}}}`).result(t)
		f.call(t, f.user, `{}`, "tools/call", `{"name":"a__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"listen log of a"}}}`).result(t)
		m := nextMethod(t, events, protocol.NotificationMessage)
		assert.Contains(t, string(m.Params), "listen log of a", "b's log is not cc-user's")

		// cc-admin's stream asking for a's resource is not agreed to it.
		adminEvents := listenWith(t, ctx, f.base, f.admin, `{"resourceSubscriptions":["mock://resource/1"]}`, "")
		ack := nextMethod(t, adminEvents, protocol.NotificationSubscriptionsAck)
		assert.NotContains(t, string(ack.Params), "mock://resource/1")
	})

	t.Run("status", func(t *testing.T) {
		status, body := f.get(t, f.admin, "/status")
		require.Equal(t, http.StatusOK, status, body)
		var rep gateway.StatusReport
		require.NoError(t, json.Unmarshal([]byte(body), &rep))
		assert.Equal(t, 1, rep.Sessions, "cc-admin's own session only")
		require.NotNil(t, rep.Channels)
		for _, s := range rep.Channels.Servers {
			assert.NotEqual(t, "a", s.Server, "a's channel queue is not cc-admin's")
		}
		assert.Equal(t, 2, f.g.Status().Sessions, "the operator's status has both")
	})

	t.Run("events", func(t *testing.T) {
		// /events from the start: cc-admin gets no event of a or fx.
		lines := f.stream(t, f.admin, "/events?after=1")
		f.call(t, f.admin, `{}`, "tools/call", `{"name":"b__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"events marker"}}}`).result(t)
		var servers []string
		for {
			ev := lines.Event("cc-admin's events up to the marker")
			var h struct {
				Server string          `json:"server"`
				Data   json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &h))
			servers = append(servers, h.Server)
			if strings.Contains(string(h.Data), "events marker") {
				break
			}
		}
		assert.Contains(t, servers, "b")
		assert.NotContains(t, servers, "a")
		assert.NotContains(t, servers, "fx")
	})

	t.Run("metrics", func(t *testing.T) {
		status, _ := f.get(t, f.admin, "/metrics")
		assert.Equal(t, http.StatusOK, status, "an admin")
		// cc-user with the admin scope is still no admin: an admin rule
		// exists and does not match it.
		scoped := ccToken(t, f.issuer, "cc-user", f.resource, "mcp:tools mcpvisor:admin")
		status, body := f.get(t, scoped, "/metrics")
		assert.Equal(t, http.StatusForbidden, status, body)
	})

	t.Run("dashboard data", func(t *testing.T) {
		scoped := ccToken(t, f.issuer, "cc-user", f.resource, "mcp:tools mcpvisor:admin")
		for _, tc := range []struct {
			who, token   string
			mine, theirs string
			rows         []string
		}{{"cc-user", scoped, "a", "b", []string{"a", "fx"}}, {"cc-admin", f.admin, "b", "a", []string{"b"}}} {
			status, body := f.get(t, tc.token, "/admin/pool")
			require.Equal(t, http.StatusOK, status, body)
			var pool struct {
				Tools []struct {
					Server string `json:"server"`
				} `json:"tools"`
				Prompts []struct {
					Server string `json:"server"`
				} `json:"prompts"`
				Resources []struct {
					Server string `json:"server"`
				} `json:"resources"`
				Templates []struct {
					Server string `json:"server"`
				} `json:"templates"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &pool))
			var servers []string
			for _, s := range pool.Tools {
				servers = append(servers, s.Server)
			}
			for _, s := range pool.Prompts {
				servers = append(servers, s.Server)
			}
			for _, s := range pool.Resources {
				servers = append(servers, s.Server)
			}
			for _, s := range pool.Templates {
				servers = append(servers, s.Server)
			}
			assert.Contains(t, servers, tc.mine, tc.who)
			assert.NotContains(t, servers, tc.theirs, tc.who)

			status, body = f.get(t, tc.token, "/admin/channels")
			require.Equal(t, http.StatusOK, status, body)
			assert.Contains(t, body, "chan of "+tc.mine, tc.who)
			assert.NotContains(t, body, "chan of "+tc.theirs, tc.who)

			lines := f.stream(t, tc.token, "/admin/stream")
			snap := lines.Event("the dashboard's snapshot")
			require.Equal(t, "snapshot", snap.Type)
			var s struct {
				Servers []struct {
					Name string `json:"name"`
				} `json:"servers"`
				History  map[string]json.RawMessage `json:"history"`
				Channels []struct {
					Server string `json:"server"`
				} `json:"channels"`
				Actions map[string]bool `json:"actions"`
				Gateway struct {
					Sessions int `json:"sessions"`
				} `json:"gateway"`
			}
			require.NoError(t, json.Unmarshal([]byte(snap.Data), &s))
			var rows []string
			for _, r := range s.Servers {
				rows = append(rows, r.Name)
			}
			assert.Equal(t, tc.rows, rows, tc.who)
			for name := range s.History {
				assert.Contains(t, tc.rows, name, tc.who)
			}
			for _, c := range s.Channels {
				assert.Contains(t, tc.rows, c.Server, tc.who)
			}
			assert.Equal(t, tc.who == "cc-admin", s.Actions["reconnect"], "%s: the actions are an admin's", tc.who)
			assert.LessOrEqual(t, s.Gateway.Sessions, 1, "%s: its own sessions only", tc.who)

			// The live events: the other's server's log is not sent.
			f.call(t, f.user, `{}`, "tools/call", `{"name":"a__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"dash of a"}}}`).result(t)
			f.call(t, f.admin, `{}`, "tools/call", `{"name":"b__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"dash of b"}}}`).result(t)
			for {
				ev := lines.Event(tc.who + ": the dashboard's events up to its own server's log")
				if ev.Type != "events" {
					continue
				}
				assert.NotContains(t, ev.Data, "dash of "+tc.theirs, tc.who)
				assert.NotContains(t, ev.Data, `"server":"`+tc.theirs+`"`, tc.who)
				if strings.Contains(ev.Data, "dash of "+tc.mine) {
					break
				}
			}
			lines.Close()
		}
	})

	t.Run("dashboard actions", func(t *testing.T) {
		scoped := ccToken(t, f.issuer, "cc-user", f.resource, "mcp:tools mcpvisor:admin")
		for _, tc := range []struct {
			who, token, path string
			want             int
		}{
			{"cc-user, no admin", scoped, "/admin/servers/a/reconnect", http.StatusForbidden},
			{"cc-user, no admin", scoped, "/admin/servers/a/toggle", http.StatusForbidden},
			{"cc-admin, another's server", f.admin, "/admin/servers/a/reconnect", http.StatusForbidden},
			{"cc-admin, its own server", f.admin, "/admin/servers/b/reconnect", http.StatusOK},
		} {
			status, body := f.do(t, http.MethodPost, tc.token, tc.path)
			assert.Equal(t, tc.want, status, "%s: %s: %s", tc.who, tc.path, body)
		}

		// cc-admin's "reconnect all" reconnects b, not a nor fx: the
		// operator's /events sees b's states only, up to a marker.
		lines := f.stream(t, viewOperatorToken, "/events")
		status, body := f.do(t, http.MethodPost, f.admin, "/admin/reconnect")
		require.Equal(t, http.StatusOK, status, body)
		// Read until b is ready again, then until a marker sent after.
		states := map[string]int{}
		marked := false
		for {
			ev := lines.Event("the operator's events: b reconnected, then the marker")
			var h struct {
				Type   string          `json:"type"`
				Server string          `json:"server"`
				State  string          `json:"state"`
				Data   json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &h))
			if h.Type == string(mcpvisor.EventServerState) {
				states[h.Server]++
				if h.Server == "b" && h.State == string(mcpvisor.StateReady) && !marked {
					marked = true
					f.call(t, f.admin, `{}`, "tools/call", `{"name":"b__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"reconnect marker"}}}`).result(t)
				}
			}
			if strings.Contains(string(h.Data), "reconnect marker") {
				break
			}
		}
		assert.Positive(t, states["b"], "b was reconnected")
		assert.Zero(t, states["a"], "a was not")
		assert.Zero(t, states["fx"], "fx was not")
	})

	t.Run("dashboard login", func(t *testing.T) {
		// The dashboard's login cookie, had for the static token, is the
		// operator's, as the token is: every server, and the actions.
		form := strings.NewReader("token=" + viewOperatorToken)
		req, err := http.NewRequest(http.MethodPost, f.base+"/login", form)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		noRedirect := &http.Client{Timeout: testwait.Patience, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Value != "" {
				cookie = c
			}
		}
		require.NotNil(t, cookie, "a login cookie")
		get := func(method, path string) (int, string) {
			req, err := http.NewRequest(method, f.base+path, nil)
			require.NoError(t, err)
			req.AddCookie(cookie)
			resp, err := (&http.Client{Timeout: testwait.Patience}).Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(b)
		}
		status, body := get(http.MethodGet, "/admin/pool")
		require.Equal(t, http.StatusOK, status, body)
		for _, server := range []string{`"server":"a"`, `"server":"b"`, `"server":"fx"`} {
			assert.Contains(t, body, server)
		}
		status, body = get(http.MethodPost, "/admin/servers/a/reconnect")
		assert.Equal(t, http.StatusOK, status, body)
		status, _ = get(http.MethodPost, gateway.MCPPath)
		assert.Equal(t, http.StatusUnauthorized, status, "the MCP endpoint still wants a token")
	})

	t.Run("sessions are their callers'", func(t *testing.T) {
		// cc-admin's token on cc-user's session: refused.
		thief := &rawClient{t: t, url: f.base, session: userSession.session, header: http.Header{"Authorization": {"Bearer " + f.admin}}}
		resp, body := thief.post(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		m, err := protocol.Decode([]byte(body))
		require.NoError(t, err, body)
		require.NotNil(t, m.Error, body)
		assert.Equal(t, int64(gateway.CodeAccessDenied), m.Error.Code)
		assert.Contains(t, string(m.Error.Data), `"reason":"session"`)
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			req, err := http.NewRequest(method, f.base+gateway.MCPPath, nil)
			require.NoError(t, err)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", userSession.session)
			req.Header.Set("Authorization", "Bearer "+f.admin)
			resp, err := streamClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, method)
		}
		// Its own caller's requests still pass.
		resp, body = userSession.post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Contains(t, body, "a__echo")
	})

	t.Run("list changes", func(t *testing.T) {
		// Fresh sessions: a change of fx's tools reaches cc-user's, not
		// cc-admin's, which gets b's.
		user := &rawClient{t: t, url: f.base, header: http.Header{"Authorization": {"Bearer " + f.user}}}
		admin := &rawClient{t: t, url: f.base, header: http.Header{"Authorization": {"Bearer " + f.admin}}}
		user.initialize()
		admin.initialize()
		userStream := sessionStream(t, f.base, user)
		adminStream := sessionStream(t, f.base, admin)
		next := func(lines *testwait.LineReader, what string, want func(*protocol.Message) bool) {
			t.Helper()
			for {
				m, err := protocol.Decode([]byte(lines.Event(what).Data))
				require.NoError(t, err)
				if want(m) {
					return
				}
			}
		}
		f.call(t, f.user, `{}`, "tools/call", `{"name":"fx__test_trigger_tool_change","arguments":{}}`).result(t)
		next(userStream, "fx's tools/list_changed on cc-user's stream", func(m *protocol.Message) bool {
			return m.Method == protocol.NotificationToolsListChanged
		})
		// fx's change went out before b's marker: cc-admin's stream has
		// the marker first, then b's change.
		f.call(t, f.admin, `{}`, "tools/call", `{"name":"b__notify","arguments":{"method":"notifications/message","params":{"level":"warning","data":"list marker"}}}`).result(t)
		f.call(t, f.admin, `{}`, "tools/call", `{"name":"b__announce","arguments":{"text":"announced_by_b"}}`).result(t)
		var first string
		next(adminStream, "the marker or a tools/list_changed on cc-admin's stream", func(m *protocol.Message) bool {
			first = m.Method
			return m.Method == protocol.NotificationToolsListChanged || m.Method == protocol.NotificationMessage && strings.Contains(string(m.Params), "list marker")
		})
		assert.Equal(t, protocol.NotificationMessage, first, "fx's tools/list_changed is not cc-admin's")
		next(adminStream, "b's tools/list_changed on cc-admin's stream", func(m *protocol.Message) bool {
			return m.Method == protocol.NotificationToolsListChanged
		})
	})
}

func mustParse(t *testing.T, rules string) access.Config {
	t.Helper()
	cfg, err := access.Parse([]byte(rules))
	require.NoError(t, err)
	return cfg
}

// sessionStream opens c's GET stream.
func sessionStream(t *testing.T, base string, c *rawClient) *testwait.LineReader {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+gateway.MCPPath, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := streamClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return testwait.NewLineReader(t, resp.Body)
}

// listenWith opens a subscriptions/listen stream with token, the filter
// and the log level (none when empty) of its _meta.
func listenWith(t *testing.T, ctx context.Context, base, token, filter, level string) <-chan protocol.Message {
	t.Helper()
	c := newStatelessClient(t, base, `{}`)
	params := c.params(`{"notifications":` + filter + `}`)
	if level != "" {
		params = strings.Replace(params, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"`+level+`",`, 1)
	}
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":` + params + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+gateway.MCPPath, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocol.Version20260728)
	req.Header.Set("Mcp-Method", protocol.MethodSubscriptionsListen)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req) // testwait:ok ctx ends within Patience
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan protocol.Message, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if m, err := protocol.Decode([]byte(data)); err == nil {
					select {
					case out <- *m:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return out
}

// A server's request (sampling) made during one caller's call is never
// asked of another caller's session, even one that may use the server
// and can answer: cc-user's call of fx's test_sampling, from a host that
// declared no sampling, finds no client, though cc-admin's host (which
// may use fx too) declared it and is connected.
func TestServerRequestsStayWithTheirCaller(t *testing.T) {
	ln, resource := loopbackListener(t)
	issuer := oauthtest.StartOIDCProvider(t, "..", resource, 300, "OIDC_SCOPES=mcp:tools")
	v, err := authn.New(authn.Options{Issuer: issuer, Audience: resource})
	require.NoError(t, err)
	policy, err := access.Compile(mustParse(t, `[{"match": {"groups": "team-cc-*"}, "servers": {"allow": ["fx"]}}]`))
	require.NoError(t, err)
	var fwd gateway.Forwarder
	o := mcpvisor.Options{Logger: zerolog.Nop()}
	fwd.Configure(&o)
	sup, err := mcpvisor.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sup.Close(testwait.Context(t))) })
	_, err = sup.SetServers(testwait.Context(t), map[string]mcpvisor.ServerConfig{
		"fx": {Config: mockserver.Command("-name", "fx", "-conformance"), ProtocolVersion: protocol.Version20251125},
	}, mcpvisor.AwaitSettled(testwait.Patience))
	require.NoError(t, err)
	rs := &gateway.ResourceServer{Validator: v, Resource: resource, AuthorizationServers: []string{issuer}, Scopes: []string{"mcp:tools"}}
	srv := serveOnForwarded(t, sup, &fwd, gateway.Options{ResourceServer: rs, Access: policy}, ln)

	connect := func(token string, o mcpvisor.Options) *mcpvisor.Supervisor {
		o.Logger = zerolog.Nop()
		h, err := mcpvisor.Start(context.Background(), o)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, h.Close(testwait.Context(t))) })
		_, err = h.SetServers(testwait.Context(t), map[string]mcpvisor.ServerConfig{"gw": {Config: transports.Config{Type: "http", URL: srv.URL + gateway.MCPPath,
			Headers: map[string]string{"Authorization": "Bearer " + token}}, ProtocolVersion: protocol.Version20251125}}, mcpvisor.AwaitSettled(testwait.Patience))
		require.NoError(t, err)
		require.Equal(t, mcpvisor.StateReady, h.Status()[0].State, h.Status()[0].LastError)
		return h
	}
	asked := make(chan string, 4)
	connect(ccToken(t, issuer, "cc-admin", resource, "mcp:tools"), mcpvisor.Options{
		Sampling: func(_ context.Context, server string, _ *protocol.CreateMessageParams) (*protocol.CreateMessageResult, error) {
			asked <- server
			var r protocol.CreateMessageResult
			err := json.Unmarshal([]byte(`{"role":"assistant","content":{"type":"text","text":"sampled by cc-admin"},"model":"m"}`), &r)
			return &r, err
		},
	})
	user := connect(ccToken(t, issuer, "cc-user", resource, "mcp:tools"), mcpvisor.Options{})
	res, err := user.CallTool(testwait.Context(t), "mcp__gw__fx__test_sampling", map[string]string{"prompt": "hi"})
	require.NoError(t, err)
	require.True(t, res.IsError, "cc-admin's client must not answer cc-user's call: %+v", res.Content)
	assert.Contains(t, res.Content[0].Text, "no downstream client")
	assert.Empty(t, asked)
}

// serveOnForwarded runs a gateway over sup (attached to fwd) behind an
// HTTP server on ln.
func serveOnForwarded(t *testing.T, sup gateway.Backend, fwd *gateway.Forwarder, opts gateway.Options, ln net.Listener) *httptest.Server {
	t.Helper()
	g := gateway.New(sup, opts)
	fwd.Attach(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, 5*time.Millisecond)
	}()
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	return srv
}
