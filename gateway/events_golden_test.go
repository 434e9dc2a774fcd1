package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/trust"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the tests that have them")

// sseEvent is one event read from /events: its SSE name and id, and the
// JSON data.
type sseEvent struct {
	name, id string
	data     map[string]any
	raw      string
}

// eventStream reads /events of a gateway into a channel.
func eventStream(t *testing.T, base, query string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events"+query, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseEvent, 1024)
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the /events reader did not end within 10 s of its cancellation")
		}
	})
	go func() {
		defer close(done)
		defer close(out)
		br := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.raw = strings.TrimPrefix(line, "data: ")
				if err := json.Unmarshal([]byte(ev.raw), &ev.data); err != nil {
					ev.data = map[string]any{"undecodable": ev.raw}
				}
			case line == "" && ev.name != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// awaitEvent returns the next event of the stream named name for which
// match (nil: any) holds, skipping the others; it fails the test after
// 20 s.
func awaitEvent(t *testing.T, events <-chan sseEvent, name string, match func(map[string]any) bool) sseEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the /events stream ended while waiting for a %s event", name)
			if ev.name == name && (match == nil || match(ev.data)) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event on /events within 20 s", name)
		}
	}
}

// awaitEvents returns the first event of each name that its match (nil:
// any) accepts, in whatever order they come; it fails the test after
// 20 s.
func awaitEvents(t *testing.T, events <-chan sseEvent, want map[string]func(map[string]any) bool) map[string]sseEvent {
	t.Helper()
	got := map[string]sseEvent{}
	deadline := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the /events stream ended while waiting for %v", want)
			match, wanted := want[ev.name]
			if _, seen := got[ev.name]; wanted && !seen && (match == nil || match(ev.data)) {
				got[ev.name] = ev
			}
		case <-deadline:
			t.Fatalf("only %d of the events %v on /events within 20 s", len(got), slices.Sorted(maps.Keys(want)))
		}
	}
	return got
}

func field(key, want string) func(map[string]any) bool {
	return func(d map[string]any) bool { return fmt.Sprint(d[key]) == want }
}

func both(fs ...func(map[string]any) bool) func(map[string]any) bool {
	return func(d map[string]any) bool {
		for _, f := range fs {
			if !f(d) {
				return false
			}
		}
		return true
	}
}

var (
	portPattern  = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	subIDPattern = regexp.MustCompile(`"io\.modelcontextprotocol/subscriptionId":\d+`)
	timePattern  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// normalize rewrites what differs from run to run (sequence numbers,
// times, ports, short IDs) so that the golden file pins the shape and
// the stable values of an event.
func normalize(t *testing.T, ev sseEvent, ids map[string]string) string {
	t.Helper()
	d := ev.data
	require.Equal(t, ev.name, d["type"], "the SSE event name is the event's type")
	if ev.id == "" { // a gap event has no place in the sequence
		require.Equal(t, 0.0, d["seq"], "an event without an SSE id has no sequence number")
	} else {
		require.Equal(t, ev.id, fmt.Sprint(d["seq"]), "the SSE id is the event's sequence number")
		d["seq"] = 1
	}
	require.Regexp(t, timePattern, d["time"])
	d["time"] = "TIME"
	for _, k := range []string{"permissionId", "pollId"} {
		if v, ok := d[k].(string); ok {
			d[k] = ids[v]
		}
	}
	if data, ok := d["data"].(map[string]any); ok {
		if v, ok := data["request_id"].(string); ok && ids[v] != "" {
			data["request_id"] = ids[v]
		}
	}
	if _, ok := d["dropped"]; ok {
		d["dropped"] = 1 // how many depends on every event before
	}
	b, err := json.Marshal(d) // map keys sorted
	require.NoError(t, err)
	s := portPattern.ReplaceAllString(string(b), "127.0.0.1:PORT")
	s = subIDPattern.ReplaceAllString(s, `"io.modelcontextprotocol/subscriptionId":1`)
	return timePattern.ReplaceAllString(s, "TIME")
}

// Every kind of event, as /events streams it: the JSON shape of each is
// pinned by testdata/events.golden (regenerate with -update). The bus
// carries typed events inside mcpvisor; what reaches an HTTP client must
// not change with their Go representation.
func TestEventsGolden(t *testing.T) {
	ctx := context.Background()
	store := trust.NewStore(t.TempDir(), nil)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Logger:      zerolog.Nop(),
		EventBuffer: 16, // small, so that a stream resuming from 0 starts with a gap
		ToolPins:    mcpvisor.PinOptions{Store: store},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, sup.Close(cctx))
	})
	_, srv := serve(t, sup, gateway.Options{})
	events := eventStream(t, srv.URL, "")

	var lines []string
	ids := map[string]string{}
	record := func(step string, ev sseEvent) {
		lines = append(lines, step+": "+normalize(t, ev, ids))
	}
	set := func(servers map[string]mcpvisor.ServerConfig) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := sup.SetServers(sctx, servers, mcpvisor.AwaitSettled(20*time.Second))
		require.NoError(t, err)
		require.Empty(t, res.Errors)
		require.True(t, res.Settled, "servers settled: %+v", res)
	}
	callTool := func(name string, args any) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := sup.CallTool(cctx, name, args)
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %+v", name, res.Content)
	}
	notify := func(method string, params any) {
		t.Helper()
		callTool("mcp__a__notify", map[string]any{"method": method, "params": params})
	}

	a := mcpvisor.ServerConfig{Config: mockserver.Command("-name", "a", "-notify-tool", "-redescribe", "-channel", "-resources", "1", "-prompts", "1")}
	servers := map[string]mcpvisor.ServerConfig{"a": a}
	set(servers)
	record("connect", awaitEvent(t, events, "server_state", both(field("server", "a"), field("state", "ready"))))
	record("connect", awaitEvent(t, events, "tools_changed", field("server", "a")))
	record("connect", awaitEvent(t, events, "prompts_changed", field("server", "a")))
	record("connect", awaitEvent(t, events, "resources_changed", field("server", "a")))

	// Two servers whose names sanitize alike claim the same tool names.
	servers["x.y"] = mcpvisor.ServerConfig{Config: mockserver.Command("-name", "x.y")}
	servers["x_y"] = mcpvisor.ServerConfig{Config: mockserver.Command("-name", "x_y")}
	set(servers)
	record("collision", awaitEvent(t, events, "collision", both(field("server", "x_y"), func(d map[string]any) bool {
		c, _ := d["collision"].(map[string]any)
		return c != nil && c["original"] == "echo"
	})))

	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, sup.Server("x.y").Toggle(tctx, false))
	record("toggle", awaitEvent(t, events, "server_toggled", field("server", "x.y")))
	require.NoError(t, sup.Server("x.y").Toggle(tctx, true))
	record("toggle", awaitEvent(t, events, "server_toggled", field("server", "x.y")))

	notify("notifications/resources/updated", map[string]any{"uri": "mock://resource/1"})
	record("notification", awaitEvent(t, events, "resource_updated", nil))
	notify("notifications/message", map[string]any{"level": "warning", "logger": "mock", "data": "disk almost full"})
	record("notification", awaitEvent(t, events, "log_message", nil))
	notify("notifications/progress", map[string]any{"progressToken": "p1", "progress": 1, "total": 2, "message": "half"})
	record("notification", awaitEvent(t, events, "progress", nil))
	notify("notifications/tasks/status", map[string]any{"taskId": "t1", "status": "working", "createdAt": "2026-11-24T00:00:00Z", "ttl": 60000})
	record("notification", awaitEvent(t, events, "task_status", nil))
	notify("notifications/claude/channel", map[string]any{"content": "build finished", "meta": map[string]any{"job": "7"}})
	record("channel", awaitEvent(t, events, "channel_message", nil))

	// A channel server asks the host for a verdict.
	notify("notifications/claude/channel/permission_request", map[string]any{"request_id": "srvid", "tool_name": "Bash", "description": "list files", "input_preview": `{"cmd":"ls"}`})
	ev := awaitEvent(t, events, "permission_request", nil)
	ids[ev.data["permissionId"].(string)] = "SERVER-ASKED-ID"
	record("permission", ev)

	// The host relays a prompt; the channel server answers it.
	prompt, to, err := sup.Channels().RequestPermission(tctx, channels.PermissionRequest{ToolName: "Write", Description: "write a file", InputPreview: `{"path":"x"}`})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, to)
	ids[prompt.ID] = "HOST-ASKED-ID"
	notify("notifications/claude/channel/permission", map[string]any{"request_id": prompt.ID, "behavior": "allow"})
	record("permission", awaitEvent(t, events, "permission_answered", nil))

	pollID, err := sup.Polling().Subscribe(mcpvisor.PollSpec{Tool: "mcp__a__echo", Args: json.RawMessage(`{"text":"polled"}`), Interval: time.Second})
	require.NoError(t, err)
	ids[pollID] = "POLL-ID"
	record("poll", awaitEvent(t, events, "poll_changed", nil))
	require.NoError(t, sup.Polling().Unsubscribe(pollID))

	// The rug pull: a tool's definition changes under pinning.
	callTool("mcp__a__redescribe", map[string]string{"tool": "echo", "text": "Echoes, and more."})
	// The two come in either order: the pool's diff and the pin report
	// are published by different hands.
	pins := awaitEvents(t, events, map[string]func(map[string]any) bool{
		"tool_definition_changed": nil,
		"tools_changed": both(field("server", "a"), func(d map[string]any) bool {
			diff, _ := d["diff"].(map[string]any)
			return diff != nil && diff["removed"] != nil
		}),
	})
	record("pins", pins["tool_definition_changed"])
	record("pins", pins["tools_changed"])

	// A server behind an authorization server, with no way to log in.
	locked := lockedServer(t)
	servers["locked"] = mcpvisor.ServerConfig{Config: transports.Config{Type: "http", URL: locked}}
	set(servers)
	record("auth", awaitEvent(t, events, "server_state", both(field("server", "locked"), field("state", "needs-auth"))))
	record("auth", awaitEvent(t, events, "auth_required", field("server", "locked")))

	// A server connected, whose tools/list is refused once.
	servers["r"] = mcpvisor.ServerConfig{Config: mockserver.Command("-name", "r", "-fail-lists", "1", "-versions", "2025-11-25")}
	set(servers)
	record("list", awaitEvent(t, events, "list_failed", field("server", "r")))

	// Removing a server stops it.
	delete(servers, "x_y")
	set(servers)
	record("remove", awaitEvent(t, events, "server_state", both(field("server", "x_y"), field("state", "stopped"))))

	// A stream resuming from the start of a bus that remembers 16 events.
	record("resume", awaitEvent(t, eventStream(t, srv.URL, "?after=0"), "gap", nil))

	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "events.golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create %s", golden)
	require.Equal(t, string(want), got, "the JSON of /events changed (regenerate with -update only when that is intended)")

	kinds := map[string]bool{}
	for _, l := range lines {
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(l[strings.Index(l, "{"):]), &d))
		kinds[d["type"].(string)] = true
	}
	var all []string
	for k := range kinds {
		all = append(all, k)
	}
	slices.Sort(all)
	require.Equal(t, []string{"auth_required", "channel_message", "collision", "gap", "list_failed", "log_message", "permission_answered",
		"permission_request", "poll_changed", "progress", "prompts_changed", "resource_updated", "resources_changed",
		"server_state", "server_toggled", "task_status", "tool_definition_changed", "tools_changed"}, all, "every kind of event is pinned")
}

// lockedServer serves a mock MCP server over Streamable HTTP behind the
// test authorization server and returns the URL to configure.
func lockedServer(t *testing.T) string {
	t.Helper()
	h, err := mockserver.NewHandler(mockserver.Options{Name: "locked"})
	require.NoError(t, err)
	mcp := httptest.NewServer(h)
	t.Cleanup(mcp.Close)
	as, err := oauthtest.New(mcp.URL, 3600)
	require.NoError(t, err)
	t.Cleanup(as.Close)
	front, err := url.Parse(as.URL)
	require.NoError(t, err)
	front.Path = gateway.MCPPath
	return front.String()
}
