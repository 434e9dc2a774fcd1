package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// capturedBackend serves the tool sets captured from real servers
// (bench/search/testdata) as a pool, to measure what tools/list costs in
// each mode; it answers no call.
type capturedBackend struct {
	stubBackend
	tools        []mcpvisor.Tool
	status       []mcpvisor.ServerStatus
	instructions map[string]string
}

func (c capturedBackend) Tools() []mcpvisor.Tool                        { return c.tools }
func (c capturedBackend) Status() []mcpvisor.ServerStatus               { return c.status }
func (c capturedBackend) ServerInstructions(name string) string         { return c.instructions[name] }
func (c capturedBackend) ListPrompts(string) ([]mcpvisor.Prompt, error) { return nil, nil }

// loadCaptured reads the captured servers in dir.
func loadCaptured(t testing.TB, dir string) capturedBackend {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	c := capturedBackend{instructions: map[string]string{}}
	for _, f := range files {
		if filepath.Base(f) == "queries.json" {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var s struct {
			Name         string                  `json:"name"`
			ServerInfo   protocol.Implementation `json:"serverInfo"`
			Instructions string                  `json:"instructions"`
			Tools        []protocol.Tool         `json:"tools"`
		}
		require.NoError(t, json.Unmarshal(b, &s), f)
		c.status = append(c.status, mcpvisor.ServerStatus{Name: s.Name, State: mcpvisor.StateReady, ServerInfo: s.ServerInfo})
		c.instructions[s.Name] = s.Instructions
		for _, tl := range s.Tools {
			c.tools = append(c.tools, mcpvisor.Tool{Name: mcpvisor.QualifiedName(s.Name, tl.Name), Server: s.Name, Definition: tl})
		}
	}
	return c
}

// The tokens of tools/list in full and search mode for the tool sets
// captured from real servers (bench/search/testdata; another directory
// with MCPVISOR_SEARCH_CORPUS). docs/gateway.md has the figures.
func TestToolListTokensCaptured(t *testing.T) {
	dir := os.Getenv("MCPVISOR_SEARCH_CORPUS")
	if dir == "" {
		dir = "../bench/search/testdata"
	}
	_, err := os.Stat(dir)
	require.NoError(t, err, "the captured tool sets are part of the repository")
	b := loadCaptured(t, dir)
	require.NotEmpty(t, b.tools)
	_, srv := serve(t, b, gateway.Options{})
	tokens := map[string]int{}
	for _, path := range []string{gateway.MCPFullPath, gateway.MCPSearchPath} {
		a := statelessAt(t, srv.URL+path).call("tools/list", `{}`)
		var res protocol.ListToolsResult
		require.NoError(t, json.Unmarshal(a.result(t)["tools"], &res.Tools))
		var bytes int
		for _, tl := range res.Tools {
			enc, err := json.Marshal(tl)
			require.NoError(t, err)
			bytes += len(enc)
		}
		tokens[path] = bytes / 4
		t.Logf("%s: %d servers, %d tools in the pool; tools/list lists %d tools, %d bytes, ~%d tokens",
			path, len(b.status), len(b.tools), len(res.Tools), bytes, bytes/4)
		if path == gateway.MCPSearchPath {
			for _, tl := range res.Tools {
				if tl.Name == "search_tools" {
					t.Logf("search_tools' description:\n%s", tl.Description)
					require.Equal(t, len(b.status), strings.Count(tl.Description, "\n- "), "one line per server")
				}
			}
		}
	}
	require.Less(t, tokens[gateway.MCPSearchPath], tokens[gateway.MCPFullPath]/10)
}

// BenchmarkSearchToolsCaptured measures a search_tools call over the 492
// captured tools, through the gateway's handler in process: the index
// sync (fingerprints of every server), the search and the answer.
func BenchmarkSearchToolsCaptured(b *testing.B) {
	dir := os.Getenv("MCPVISOR_SEARCH_CORPUS")
	if dir == "" {
		dir = "../bench/search/testdata"
	}
	_, err := os.Stat(dir)
	require.NoError(b, err, "the captured tool sets are part of the repository")
	be := loadCaptured(b, dir)
	g, _ := serve(b, be, gateway.Options{ToolMode: gateway.ToolsSearch})
	h := g.Handler()
	body := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"}},` +
		`"name":"search_tools","arguments":{"query":"create a pull request on github"}}}`)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, gateway.MCPPath, bytes.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "search_tools")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "github__create_pull_request") {
			b.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
		}
	}
}
