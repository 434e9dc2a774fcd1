package mockserver

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// wsSubprotocol is the only WebSocket subprotocol the mock server accepts.
const wsSubprotocol = "mcp"

// serveWS serves /ws: one WebSocket connection is one client, like stdio,
// with one text message per JSON-RPC message.
func (h *handler) serveWS(w http.ResponseWriter, r *http.Request) {
	if !offersSubprotocol(r, wsSubprotocol) {
		http.Error(w, "mockserver: the WebSocket subprotocol must be "+wsSubprotocol, http.StatusBadRequest)
		return
	}
	// Counted under the mutex, so that Close's Wait (after shutdown)
	// happens after every Add.
	h.mu.Lock()
	if h.shut {
		h.mu.Unlock()
		http.Error(w, "mockserver: shutting down", http.StatusServiceUnavailable)
		return
	}
	h.conns.Add(1)
	h.mu.Unlock()
	defer h.conns.Done()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{wsSubprotocol}})
	if err != nil {
		return // Accept has answered
	}
	defer c.CloseNow()
	c.SetReadLimit(maxBody)

	// The request's context must not be used after the upgrade.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.closing:
			c.Close(websocket.StatusGoingAway, "mockserver shutting down")
		case <-h.dead:
			c.CloseNow()
		case <-ctx.Done():
		}
	}()

	conn := &wsConn{c: c, garbage: h.o.Garbage}
	p := &peer{conn: conn}
	h.s.hub.add(conn)
	defer h.s.hub.remove(conn)
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.Close(websocket.StatusUnsupportedData, "text messages only")
			return
		}
		if code, exit := h.s.handle(ctx, p, data, conn); exit {
			h.die(code)
			return
		}
	}
}

// offersSubprotocol reports whether the upgrade request offers proto.
func offersSubprotocol(r *http.Request, proto string) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(p) == proto {
				return true
			}
		}
	}
	return false
}

// wsConn is a WebSocket client's output and notification sink. The mutex
// keeps the Garbage fault's messages next to the message they precede.
type wsConn struct {
	c       *websocket.Conn
	garbage bool
	mu      sync.Mutex
}

func (c *wsConn) send(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx := context.Background() // closing the connection unblocks a write
	if c.garbage {
		_ = c.c.Write(ctx, websocket.MessageText, []byte(garbageLine))
		_ = c.c.Write(ctx, websocket.MessageText, []byte(garbageFrame))
	}
	_ = c.c.Write(ctx, websocket.MessageText, frame)
}

func (c *wsConn) notify(frame []byte) { c.send(frame) }

func (c *wsConn) sendOversize(id protocol.ID, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wr, err := c.c.Writer(context.Background(), websocket.MessageText)
	if err != nil {
		return
	}
	_ = writeOversize(wr, id, size)
	_ = wr.Close()
}
