package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// pollClient is a bare Streamable HTTP client of one session.
type pollClient struct {
	t       *testing.T
	url     string
	session string
	version string
}

func (c *pollClient) do(method, body string, header map[string]string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(testwait.Context(c.t), method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set(mcpserver.HeaderSessionID, c.session)
		req.Header.Set(mcpserver.HeaderProtocolVersion, c.version)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, body, err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// open initializes a session at version.
func (c *pollClient) open(version string) {
	c.t.Helper()
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	c.session, c.version = resp.Header.Get(mcpserver.HeaderSessionID), version
	if resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("initialized: HTTP %d", resp.StatusCode)
	}
}

// rawEvent is one event of a stream as written, priming events included.
type rawEvent struct{ id, retry, data string }

// readAll reads the events of resp to the end of its stream.
func readAll(t *testing.T, resp *http.Response, what string) []rawEvent {
	t.Helper()
	rest, err := testwait.NewLineReader(t, resp.Body).Rest(what)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var out []rawEvent
	for _, block := range strings.Split(rest, "\n\n") {
		var ev rawEvent
		seen := false
		for _, line := range strings.Split(block, "\n") {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.id, seen = value, true
			case "retry":
				ev.retry, seen = value, true
			case "data":
				ev.data, seen = value, true
			}
		}
		if seen {
			out = append(out, ev)
		}
	}
	return out
}

// HTTPOptions.PollAfter (SEP-1699): a request of a 2025-11-25 session
// still unanswered after PollAfter has its POST stream ended after a
// priming event (an id, the retry field, no data); what it sends after
// (a progress notification, then its answer) reaches the GET that
// resumes with that Last-Event-ID, which then ends; the stream is then
// forgotten (404). The requests Pollable declines, and those of a
// session of an earlier version, are answered on their POST.
func TestLongRequestIsPolled(t *testing.T) {
	release := make(chan struct{})
	handler := mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Method != "slow/call" {
			// Long enough to be polled, were it polled.
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		} else {
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
		}
		w.Notify(protocol.NotificationProgress, json.RawMessage(`{"progressToken":1,"progress":1}`))
		w.Reply(json.RawMessage(`{"done":true}`))
	})
	srv := mcpserver.New(mcpserver.Options{Handler: handler, HTTP: mcpserver.HTTPOptions{
		PollAfter: 10 * time.Millisecond,
		SSERetry:  300 * time.Millisecond,
		Pollable:  func(r *mcpserver.Request) bool { return r.Method != "slow/quick" },
	}})
	hs := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})

	c := &pollClient{t: t, url: hs.URL}
	c.open(protocol.Version20251125)
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":5,"method":"slow/call"}`, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("the polled POST answers an event stream, got %q", ct)
	}
	events := readAll(t, resp, "the polled POST's stream to end")
	if len(events) != 1 || events[0].id == "" || events[0].retry != "300" || events[0].data != "" {
		t.Fatalf("the POST stream ends after one priming event (an id, retry 300, no data), got %+v", events)
	}
	if got := srv.Stats().Polled; got != 1 {
		t.Errorf("Stats.Polled = %d, want 1", got)
	}
	close(release)
	resume := map[string]string{mcpserver.HeaderLastEventID: events[0].id}
	resp = c.do(http.MethodGet, "", resume)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with the priming event's id: HTTP %d", resp.StatusCode)
	}
	events = readAll(t, resp, "the resumed stream to end with the answer")
	if len(events) != 2 || !strings.Contains(events[0].data, protocol.NotificationProgress) || !strings.Contains(events[1].data, `"done":true`) {
		t.Fatalf("the resumed stream carries the progress, then the answer, then ends; got %+v", events)
	}
	if resp := c.do(http.MethodGet, "", resume); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a stream read to its answer is forgotten: want 404, got HTTP %d", resp.StatusCode)
	}
	if resp := c.do(http.MethodGet, "", map[string]string{mcpserver.HeaderLastEventID: "not-an-id"}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed Last-Event-ID: want 400, got HTTP %d", resp.StatusCode)
	}

	resp = c.do(http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"slow/quick"}`, nil)
	if body := readBody(t, resp); !strings.Contains(body, `"done":true`) {
		t.Errorf("a request Pollable declines is answered on its POST, got %q", body)
	}
	old := &pollClient{t: t, url: hs.URL}
	old.open(protocol.Version20250618)
	resp = old.do(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"slow/wait"}`, nil)
	if body := readBody(t, resp); !strings.Contains(body, `"done":true`) {
		t.Errorf("a 2025-06-18 session cannot resume: its POST carries the answer, got %q", body)
	}
	if got := srv.Stats().Polled; got != 1 {
		t.Errorf("Stats.Polled = %d after requests that are not polled, want 1", got)
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	return testwait.Result(t, "the POST's body", func() string {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		return string(b)
	})
}
