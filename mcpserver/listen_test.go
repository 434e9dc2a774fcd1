package mcpserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// A notification sent as soon as the client holds a listen stream's
// acknowledgement reaches that stream: the stream is registered before
// the acknowledgement goes out (it once was after, and a list_changed sent
// in between was lost). Many streams, to meet the window if it is open.
func TestListenAckPrecedesEveryNotification(t *testing.T) {
	srv := mcpserver.New(mcpserver.Options{})
	hs := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	const body = `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` +
		`"notifications":{"toolsListChanged":true}}}`
	for i := range 50 {
		req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodPost, hs.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", protocol.Version20260728)
		req.Header.Set("Mcp-Method", protocol.MethodSubscriptionsListen)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("listen: HTTP %d", resp.StatusCode)
		}
		r := testwait.NewLineReader(t, resp.Body)
		if ev := r.Event("the acknowledgement"); !strings.Contains(ev.Data, protocol.NotificationSubscriptionsAck) {
			t.Fatalf("stream %d: first event %q", i, ev.Data)
		}
		srv.ListChanged(protocol.NotificationToolsListChanged)
		if ev := r.Event("list_changed on the stream just acknowledged"); !strings.Contains(ev.Data, protocol.NotificationToolsListChanged) {
			t.Fatalf("stream %d: after the ack, %q", i, ev.Data)
		}
		resp.Body.Close()
	}
}
