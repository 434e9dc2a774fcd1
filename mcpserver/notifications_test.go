package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// stdioClient serves srv over a pair of pipes, as a stdio server.
type stdioClient struct {
	t   *testing.T
	in  *io.PipeWriter
	out *testwait.LineReader
}

func serveStdio(t *testing.T, srv *mcpserver.Server) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		testwait.Recv(t, done, "ServeStdio to return at the end of its input")
	})
	return &stdioClient{t: t, in: inW, out: testwait.NewLineReader(t, outR)}
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	testwait.Call(c.t, "writing to the server's stdin", func() {
		if _, err := io.WriteString(c.in, line+"\n"); err != nil {
			c.t.Error(err)
		}
	})
}

// next returns the method of the next message the server writes, or
// "response" for an answer.
func (c *stdioClient) next(what string) string {
	c.t.Helper()
	line := c.out.MustLine(what)
	m, err := protocol.Decode([]byte(line))
	if err != nil {
		c.t.Fatalf("%s: %v: %s", what, err, line)
	}
	if m.Kind == protocol.KindResponse {
		return "response"
	}
	return m.Method
}

const modernList = `{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

func request(id int) string { return fmt.Sprintf(modernList, id) }

// A stdio connection of the stateless era gets the notifications that
// belong to no request only with Options.ModernConnNotifications (the
// mock's choice, as servers behaved before listen streams); otherwise
// only on a listen stream.
func TestModernConnNotifications(t *testing.T) {
	list := mcpserver.HandlerFunc(func(_ context.Context, w mcpserver.ResponseWriter, _ *mcpserver.Request) {
		w.Reply(json.RawMessage(`{"tools":[]}`))
	})
	for _, on := range []bool{false, true} {
		srv := mcpserver.New(mcpserver.Options{Handler: list, ModernConnNotifications: on})
		c := serveStdio(t, srv)
		c.send(request(1))
		if got := c.next("the answer to the first tools/list"); got != "response" {
			t.Fatalf("on=%v: got %s before the answer", on, got)
		}
		srv.ListChanged(protocol.NotificationToolsListChanged)
		c.send(request(2))
		got := c.next("list_changed or the answer to the second tools/list")
		switch {
		case on && got != protocol.NotificationToolsListChanged:
			t.Errorf("with ModernConnNotifications the connection gets list_changed first, got %s", got)
		case !on && got != "response":
			t.Errorf("without ModernConnNotifications the connection gets no list_changed, got %s", got)
		}
		srv.Close()
	}
}

// A notification that belongs to no request reaches a stdio connection
// of the stateless era at most once while the connection opens a listen
// stream (it once went out on the connection, which had no stream yet,
// and again on the stream opened meanwhile). Many notifications sent
// while the stream opens, to meet the window if it is open.
func TestBroadcastWhileAListenStreamOpensSendsOnce(t *testing.T) {
	for round := range 20 {
		srv := mcpserver.New(mcpserver.Options{ModernConnNotifications: true})
		c := serveStdio(t, srv)
		stop := make(chan struct{})
		go func() {
			for n := 1; ; n++ {
				select {
				case <-stop:
					srv.Broadcast("notifications/test-end", nil)
					return
				default:
				}
				srv.Broadcast("notifications/test", map[string]int{"n": n})
			}
		}()
		c.send(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` +
			`"notifications":{"toolsListChanged":true}}}`)
		seen := map[int]int{}
		acked, after := false, 0
		for ended := false; !ended; {
			line := c.out.MustLine("notifications around the listen stream's acknowledgement")
			m, err := protocol.Decode([]byte(line))
			if err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			switch m.Method {
			case protocol.NotificationSubscriptionsAck:
				acked = true
			case "notifications/test-end":
				ended = true
			case "notifications/test":
				var p struct {
					Params struct {
						N int `json:"n"`
					} `json:"params"`
				}
				if err := json.Unmarshal([]byte(line), &p); err != nil {
					t.Fatal(err)
				}
				if seen[p.Params.N]++; seen[p.Params.N] > 1 {
					close(stop)
					t.Fatalf("round %d: notification %d arrived twice", round, p.Params.N)
				}
				if acked {
					if after++; after == 50 {
						close(stop) // the reader goes on until the end marker
					}
				}
			}
		}
		srv.Close()
	}
}
