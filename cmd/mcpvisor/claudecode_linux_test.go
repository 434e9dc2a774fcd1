package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// claudeCode returns the claude binary (make deps installs
// @anthropic-ai/claude-code into .deps/npm-claude-<version>;
// MCPVISOR_CLAUDE_CODE names it), or skips the test (fails it with
// MCPVISOR_REQUIRE_INTEROP=1).
func claudeCode(t *testing.T) string {
	t.Helper()
	bin := newestDep("npm-claude-*/node_modules/.bin/claude")
	if v := os.Getenv("MCPVISOR_CLAUDE_CODE"); v != "" {
		bin = v
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("Claude Code (make deps) is missing: %v", err)
		interop.Missing(t, msg)
	}
	return bin
}

// netns is a network namespace with loopback only, held open by an
// unshare process until the test ends.
type netns struct {
	path string // /proc/<pid>/ns/net of the holder
}

// loopbackNetns makes a network namespace whose only interface is lo, up.
// Entering it from this process (netns.do) takes CAP_SYS_ADMIN: the test
// fails without it (skips unless MCPVISOR_REQUIRE_INTEROP=1).
func loopbackNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		msg := "entering a network namespace takes root (CAP_SYS_ADMIN)"
		interop.Missing(t, msg)
	}
	cmd := exec.Command("unshare", "--net", "--", "sh", "-c", "ip link set lo up && echo up && exec cat")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close() // cat ends, and the namespace with it
		testwait.Result(t, "the namespace holder to exit", cmd.Wait)
	})
	lines := testwait.NewLineReader(t, stdout)
	require.Equal(t, "up", lines.MustLine("the namespace's loopback to come up"))
	return &netns{path: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)}
}

// do runs f on an OS thread that has entered the namespace: the sockets
// f opens and the processes it starts live there. The thread leaves the
// namespace afterwards, or dies with its goroutine if it cannot.
func (n *netns) do(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer self.Close()
		target, err := os.Open(n.path)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering %s: %w", n.path, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(ferr, err) // the thread stays locked and ends with this goroutine
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return testwait.Recv(t, done, "a function run in the network namespace")
}

// modelStandIn is a stand-in for the Anthropic Messages API (POST
// /v1/messages, answered as a stream of server-sent events when the
// request asks for one): the agent's first turn is answered with a
// tool_use of the tool pick chooses from those the request offers, the
// turn that carries its tool_result with a text that quotes the result.
// Any other request (Claude Code's side requests: titles, token counts)
// gets a short text. Its handlers run on the HTTP server's goroutines;
// mu guards what it records.
type modelStandIn struct {
	pick  func(tools []modelTool) (name string, input map[string]any)
	token string // the text the final answer quotes the result with
	sum   string // what the tool asked for answers (for the test)

	mu       sync.Mutex
	requests []string    // method and path of every request
	offered  []modelTool // the tools of the first request that offered any
	asked    string      // the tool the first turn asked for
	result   string      // the tool_result's text
}

type modelTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

type modelRequest struct {
	Stream   bool        `json:"stream"`
	Model    string      `json:"model"`
	Tools    []modelTool `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type modelBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     map[string]any  `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

const standInToolUseID = "toolu_standin_1"

func (m *modelStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.requests = append(m.requests, r.Method+" "+r.URL.Path)
	m.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req modelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":100}`)
		return
	}

	// The last message's tool_result, if it answers our tool_use.
	var result *modelBlock
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "user" {
		var blocks []modelBlock
		_ = json.Unmarshal(req.Messages[n-1].Content, &blocks)
		for i := range blocks {
			if blocks[i].Type == "tool_result" && blocks[i].ToolUseID == standInToolUseID {
				result = &blocks[i]
			}
		}
	}
	var answer modelBlock
	stop := "end_turn"
	m.mu.Lock()
	switch {
	case result != nil:
		m.result = resultText(result.Content)
		answer = modelBlock{Type: "text", Text: m.token + ": " + m.result}
	case len(req.Tools) > 0 && m.offered == nil:
		m.offered = req.Tools
		name, input := m.pick(req.Tools)
		if name == "" {
			answer = modelBlock{Type: "text", Text: "no tool to call"}
			break
		}
		m.asked = name
		answer = modelBlock{Type: "tool_use", ID: standInToolUseID, Name: name, Input: input}
		stop = "tool_use"
	default:
		answer = modelBlock{Type: "text", Text: "ok"}
	}
	m.mu.Unlock()

	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_standin", "type": "message", "role": "assistant", "model": req.Model,
			"content": []modelBlock{answer}, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": 100, "output_tokens": 10},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	bw := bufio.NewWriter(w)
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(bw, "event: %s\ndata: %s\n\n", typ, b)
	}
	event("message_start", map[string]any{"message": map[string]any{
		"id": "msg_standin", "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 100, "output_tokens": 1},
	}})
	switch answer.Type {
	case "tool_use":
		input, _ := json.Marshal(answer.Input)
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{
			"type": "tool_use", "id": answer.ID, "name": answer.Name, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{
			"type": "input_json_delta", "partial_json": string(input)}})
	default:
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": answer.Text}})
	}
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 10}})
	event("message_stop", map[string]any{})
	_ = bw.Flush()
}

// resultText is the text of a tool_result's content: a string, or text
// blocks.
func resultText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []modelBlock
	_ = json.Unmarshal(content, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// modelToolName is what the model APIs accept as a tool's name: a
// request with another is refused whole.
var modelToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// longServer is a server name as long as some in public configs: with
// Claude Code's own prefix (mcp__gw__) and the gateway's pool name
// (mcp__<server>__<tool>) its tools' names pass 64 characters.
const longServer = "acme-enterprise-knowledge-base-search-production"

// claudeCodeRun is what one run of Claude Code against supervise showed.
type claudeCodeRun struct {
	out     string // claude's stdout (--output-format json)
	model   *modelStandIn
	gateway string // supervise's log
}

// runClaudeCode starts supervise with a config of a server that starts at
// once and one with a long name that takes 2 s, and extra flags, then
// Claude Code in print mode with the gateway as its only MCP server and
// the stand-in as its model, all inside a network namespace with
// loopback only, and returns what it saw.
func runClaudeCode(t *testing.T, supervise ...string) claudeCodeRun {
	claude := claudeCode(t)
	ns := loopbackNetns(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	cfg := writeConfig(t, map[string]any{
		"fast":     mock(bin, "--name", "fast"),
		longServer: mock(bin, "--name", "kb", "--init-delay", "2s"),
	})
	// The model asks the long-named server to add two numbers: only the
	// server computes their sum.
	a := 100000 + time.Now().UnixNano()%900000
	model := &modelStandIn{token: "the sum", sum: fmt.Sprint(a + 424242), pick: func(tools []modelTool) (string, map[string]any) {
		for _, tool := range tools {
			if strings.HasPrefix(tool.Name, "mcp__gw__") && strings.Contains(tool.Name, longServer[:8]) &&
				tool.Description == "Adds two numbers." {
				return tool.Name, map[string]any{"a": a, "b": 424242}
			}
		}
		return "", nil
	}}

	var (
		ln  net.Listener
		gw  *loggedProc
		cmd *exec.Cmd
	)
	require.NoError(t, ns.do(t, func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		gw = startLogged(t, exec.Command(bin, append([]string{"supervise", "--config", cfg,
			"--listen", "127.0.0.1:0", "--state-dir", t.TempDir()}, supervise...)...))
		return nil
	}))
	srv := &http.Server{Handler: model, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		testwait.Recv(t, served, "the model stand-in to stop")
	})
	url := gatewayURL(t, gw.logs) + "/mcp"

	home, tmp := t.TempDir(), t.TempDir()
	mcpConfig := filepath.Join(home, "mcp.json")
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"gw": map[string]any{"type": "http", "url": url}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mcpConfig, b, 0o600))
	var stdout, stderr strings.Builder
	require.NoError(t, ns.do(t, func() error {
		cmd = exec.CommandContext(testwait.Context(t), claude, "-p",
			"Add 424242 with the knowledge base's add tool, then tell me the sum.",
			"--bare", "--output-format", "json",
			"--mcp-config", mcpConfig, "--strict-mcp-config",
			"--allowedTools", "mcp__gw", "--model", "claude-sonnet-4-5")
		cmd.Dir = home
		cmd.Env = []string{
			// Its state in the temporary home, its scratch files in a
			// temporary directory (not /tmp/claude-<uid>).
			"HOME=" + home, "TMPDIR=" + tmp, "CLAUDE_CODE_TMPDIR=" + tmp,
			"PATH=" + os.Getenv("PATH"), "TERM=dumb",
			"ANTHROPIC_BASE_URL=http://" + ln.Addr().String(),
			"ANTHROPIC_API_KEY=sk-ant-standin-not-a-key",
			// Nothing leaves the namespace anyway; these keep Claude Code
			// from trying.
			"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = time.Second
		return cmd.Start()
	}))
	// Claude Code runs in the namespace, not in this process's.
	own, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	require.NoError(t, err)
	held, err := os.Readlink(ns.path)
	require.NoError(t, err)
	require.Equal(t, held, theirs, "Claude Code runs in the loopback-only namespace")
	require.NotEqual(t, own, theirs)
	err = testwait.Result(t, "Claude Code to finish", cmd.Wait)
	t.Logf("claude stdout:\n%s\nclaude stderr:\n%s", stdout.String(), stderr.String())
	require.NoError(t, err)

	require.NoError(t, gw.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, gw.wait(t), "supervise exits cleanly on SIGINT; log:\n%s", gw.logs)
	return claudeCodeRun{out: stdout.String(), model: model, gateway: gw.logs.String()}
}

// Claude Code itself, configured with the gateway as its MCP server the
// way the README suggests (claude mcp add --transport http gw <url>),
// with servers still starting when it connects, one of them with a long
// name: it sends its model every server's tools, each name (with Claude
// Code's own mcp__gw__ prefix) one the model APIs accept, and calls the
// tool the model asks for, whose result reaches the model and the final
// answer. The model is a stand-in on loopback, and everything runs in a
// network namespace with loopback only.
func TestClaudeCodeThroughTheGateway(t *testing.T) {
	start := time.Now()
	run := runClaudeCode(t)
	m := run.model
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("requests to the model: %v", m.requests)

	var names []string
	for _, tool := range m.offered {
		if strings.HasPrefix(tool.Name, "mcp__gw__") {
			names = append(names, tool.Name)
		}
	}
	t.Logf("the gateway's tools as Claude Code sent them to the model: %v", names)
	for _, s := range []string{"fast", longServer[:8]} {
		for _, tool := range []string{"echo", "add", "fail", "sleep", "announce"} {
			found := false
			for _, n := range names {
				found = found || strings.HasPrefix(n, "mcp__gw__"+s) && strings.Contains(n, "__"+tool)
			}
			assert.True(t, found, "Claude Code sent the model the tool %s of server %s", tool, s)
		}
	}
	for _, tool := range m.offered {
		assert.Regexp(t, modelToolName, tool.Name, "every tool name sent to the model fits the model APIs (%d characters)", len(tool.Name))
	}
	require.NotEmpty(t, m.asked, "the model was offered the long-named server's add")
	t.Logf("the model asked for %s (%d characters); the tool_result: %q", m.asked, len(m.asked), m.result)
	// Claude Code passes the structured result ({"sum":N}) where there is one.
	assert.Contains(t, m.result, m.sum, "the tool_result is the server's answer")

	var out struct {
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(run.out), &out), "claude --output-format json: %s", run.out)
	assert.False(t, out.IsError)
	assert.Equal(t, m.token+": "+m.result, out.Result, "the final answer quotes the tool's result")
	t.Logf("Claude Code's run took %v", time.Since(start).Round(time.Millisecond))
}
