package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// identityAnswer is one stateless request's answer as a caller sees it.
type identityAnswer struct {
	status    int
	challenge string // WWW-Authenticate
	body      string
	msg       struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

// identityPost posts one stateless request (JSON-RPC id id) to base's
// MCP endpoint with token as the bearer token ("" for none).
func identityPost(t *testing.T, base, token string, id int, method, name, params string) identityAnswer {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + strings.TrimPrefix(params, "{")
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodPost, base+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := identityAnswer{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate"), body: string(b)}
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(b, &a.msg), "%s", b)
	}
	return a
}

// identityTools lists the tool names base offers token's caller.
func identityTools(t *testing.T, base, token string) []string {
	t.Helper()
	a := identityPost(t, base, token, 1, "tools/list", "", "")
	if a.status != http.StatusOK || a.msg.Error != nil {
		return []string{fmt.Sprintf("(status %d: %s)", a.status, a.body)}
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(a.msg.Result, &res))
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// Two `supervise --cluster` members with one authorization server
// (node-oidc-provider), the same access rules and each its own audit
// trail serve two callers in different groups the same way through
// either member: cc-user (group team-cc-user) sees and calls the servers
// a (on member 0) and b (on member 1) and nothing else, cc-admin (group
// team-cc-admin) only c (on member 0); a call whose server runs on the
// other member is forwarded and still answered under the caller's rules,
// a call outside them is refused typed (-32054) on both members, a
// caller without a token gets 401 with the resource metadata, /status
// shows a caller only its servers and tools, and each member's trail
// verifies and names the caller, server and pool name of every call it
// took, refused ones too.
func TestSuperviseClusterIdentities(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 6)
	mockAddr := startHTTPMock(t, bin, ports[0])
	resource := "http://127.0.0.1:" + strconv.Itoa(ports[5]) + "/mcp" // the balancer's URL
	issuer := oauthtest.StartOIDCProvider(t, "../..", resource, 120, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	on := func(name, role string) map[string]any {
		return map[string]any{"type": "http", "url": "http://" + mockAddr + "/mcp/" + name, "nodes": map[string]string{"role": role}}
	}
	cfg := writeConfig(t, map[string]any{"a": on("a", "a"), "b": on("b", "b"), "c": on("c", "a")})
	rules := filepath.Join(dir, "access.json")
	require.NoError(t, os.WriteFile(rules, []byte(`{"rules": [
	  {"match": {"groups": "team-cc-user"}, "servers": {"allow": ["a", "b"]}, "tools": {"deny": ["mcp__*__fail"]}},
	  {"match": {"groups": "team-cc-admin"}, "servers": {"allow": ["c"]}}
	]}`), 0o644))
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[3], ports[4])
	var procs []*loggedProc
	var bases, ids, trails []string
	for i, role := range []string{"a", "b"} {
		trail := filepath.Join(dir, fmt.Sprintf("audit-%d.log", i))
		p, base, id := startClusterMember(t, bin, cfg, "--cluster-addr", "127.0.0.1:"+strconv.Itoa(ports[1+i]),
			"--cluster-membership-port", strconv.Itoa(ports[3+i]), "--cluster-peers", peers, "--cluster-label", "role="+role,
			"--auth-issuer", issuer, "--auth-resource", resource, "--auth-scopes", "mcp:tools",
			"--access-rules", rules, "--audit", trail)
		procs, bases, ids, trails = append(procs, p), append(bases, base), append(ids, id), append(trails, trail)
	}
	user := ccTokenCLI(t, issuer, "cc-user", resource, "mcp:tools")
	admin := ccTokenCLI(t, issuer, "cc-admin", resource, "mcp:tools mcpvisor:admin")

	mine := func(servers ...string) []string {
		var names []string
		for _, s := range servers {
			for _, tool := range []string{"add", "announce", "echo", "sleep"} {
				names = append(names, s+"__"+tool)
			}
		}
		slices.Sort(names)
		return names
	}
	want := map[string][]string{user: mine("a", "b"), admin: append(mine("c"), "c__fail")}
	slices.Sort(want[admin])
	who := map[string]string{user: "cc-user", admin: "cc-admin"}
	// Every server ready, and each caller's pool whole, on both members.
	for i, base := range bases {
		for _, token := range []string{user, admin} {
			var got []string
			require.Eventually(t, func() bool {
				got = identityTools(t, base, token)
				return slices.Equal(got, want[token])
			}, 30*time.Second, 100*time.Millisecond, "%s's tools on member %d: %v", who[token], i, &got)
		}
	}

	// Each call: through member via, by token, of tool; ok or refused.
	type call struct {
		via   int
		token string
		tool  string
		ok    bool
	}
	calls := []call{
		{0, user, "a__echo", true}, {0, user, "b__echo", true}, // b runs on member 1
		{1, user, "a__echo", true}, {1, user, "b__echo", true}, // a runs on member 0
		{0, admin, "c__echo", true}, {1, admin, "c__echo", true},
		{0, user, "c__echo", false}, {1, user, "c__echo", false},
		{0, user, "b__fail", false}, {1, user, "a__fail", false},
		{0, admin, "a__echo", false}, {1, admin, "b__echo", false}, {1, admin, "a__echo", false},
	}
	for n, c := range calls {
		id := 100 + n
		text := fmt.Sprintf("%s via %d", who[c.token], c.via)
		desc := fmt.Sprintf("%s calling %s through member %d", who[c.token], c.tool, c.via)
		a := identityPost(t, bases[c.via], c.token, id, "tools/call", c.tool,
			fmt.Sprintf(`{"name":%q,"arguments":{"text":%q}}`, c.tool, text))
		require.Equal(t, http.StatusOK, a.status, "%s: %s", desc, a.body)
		if c.ok {
			require.Nil(t, a.msg.Error, "%s: %s", desc, a.body)
			assert.Contains(t, string(a.msg.Result), text, desc)
			continue
		}
		require.NotNil(t, a.msg.Error, "%s: %s", desc, a.body)
		assert.Equal(t, int64(-32054), a.msg.Error.Code, "%s: %s", desc, a.body)
		assert.Contains(t, a.msg.Error.Message, "not allowed", desc)
	}

	for i, base := range bases {
		a := identityPost(t, base, "", 1, "tools/list", "", "")
		assert.Equal(t, http.StatusUnauthorized, a.status, "member %d: %s", i, a.body)
		assert.Contains(t, a.challenge, `resource_metadata="http://127.0.0.1:`+strconv.Itoa(ports[5])+`/.well-known/oauth-protected-resource/mcp"`, "member %d", i)

		// /status (the admin scope) shows cc-admin its server, wherever it
		// runs, and the count and token estimate of its tools alone.
		req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, base+"/status", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		var rep struct {
			Servers []struct {
				Name       string `json:"name"`
				ToolTokens int    `json:"toolTokens"`
			} `json:"servers"`
			Tools      int `json:"tools"`
			ToolTokens int `json:"toolTokens"`
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		resp.Body.Close()
		var servers []string
		for _, s := range rep.Servers {
			servers = append(servers, s.Name)
		}
		assert.Equal(t, []string{"c"}, servers, "member %d", i)
		assert.Equal(t, len(want[admin]), rep.Tools, "member %d", i)
		if assert.Len(t, rep.Servers, 1, "member %d", i) {
			assert.Positive(t, rep.ToolTokens, "member %d", i)
			assert.Equal(t, rep.Servers[0].ToolTokens, rep.ToolTokens, "member %d: the estimate of c's tools alone", i)
		}
	}

	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range procs {
		_ = p.wait(t)
		p.exited = true
	}
	for i, trail := range trails {
		r := cli(t, "audit", "verify", trail)
		require.Equal(t, 0, r.code, "member %d: %s%s", i, r.stdout, r.stderr)
		b, err := os.ReadFile(trail)
		require.NoError(t, err)
		got := map[string]string{} // request id → subject, server, tool, outcome
		for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			l, err := audit.DecodeLine([]byte(s))
			require.NoError(t, err)
			assert.Equal(t, ids[i], l.Member, "every line names its member")
			if l.Action == audit.ActionToolsCall && len(l.RequestID) > 0 {
				got[string(l.RequestID)] = l.Subject + " " + l.Server + " " + l.Tool + " " + l.Outcome
			}
		}
		for n, c := range calls {
			if c.via != i {
				continue
			}
			outcome := audit.OutcomeOK
			if !c.ok {
				outcome = audit.OutcomeRefused
			}
			// The pool name, refused or not (docs/audit.md).
			server, _, _ := strings.Cut(c.tool, "__")
			assert.Equal(t, who[c.token]+" "+server+" mcp__"+c.tool+" "+outcome, got[strconv.Itoa(100+n)],
				"%s calling %s through member %d", who[c.token], c.tool, c.via)
		}
	}
}
