package mockserver

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// wsSubprotocol is the only WebSocket subprotocol the mock server accepts.
const wsSubprotocol = "mcp"

// serveWS serves /ws: one WebSocket connection is one client, like stdio,
// with one text message per JSON-RPC message (a mcpserver connection).
func (h *handler) serveWS(w http.ResponseWriter, r *http.Request) {
	if !offersSubprotocol(r, wsSubprotocol) {
		http.Error(w, "mockserver: the WebSocket subprotocol must be "+wsSubprotocol, http.StatusBadRequest)
		return
	}
	// Counted under the mutex, so that Close's Wait (after shutdown)
	// happens after every Add.
	done, period, ok := h.track()
	if !ok {
		http.Error(w, "mockserver: shutting down", http.StatusServiceUnavailable)
		return
	}
	defer done()
	hj := &hijackRecorder{ResponseWriter: w}
	c, err := websocket.Accept(hj, r, &websocket.AcceptOptions{Subprotocols: []string{wsSubprotocol}})
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
		case <-h.s.dead:
			c.CloseNow()
		case <-ctx.Done():
		}
	}()

	conn := &wsConn{c: c, raw: hj.conn}
	h.mu.Lock()
	if h.period != period {
		// The server went down between the upgrade and here: reset did
		// not see this connection (nor did the http.Server, which does
		// not track hijacked ones), and a restarted server would not
		// have it.
		h.mu.Unlock()
		c.CloseNow()
		return
	}
	h.ws[conn] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.ws, conn)
		h.mu.Unlock()
	}()
	_ = h.s.srv.ServeConn(ctx, conn)
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

// hijackRecorder keeps the connection the WebSocket upgrade takes over,
// so that CrashMidResponse can write a frame cut short beneath the
// WebSocket library (which only ever writes whole messages).
type hijackRecorder struct {
	http.ResponseWriter
	conn net.Conn // set by Hijack
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn = c
	return c, brw, err
}

// Unwrap lets http.ResponseController reach the connection.
func (h *hijackRecorder) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// wsConn is a WebSocket client as a mcpserver.Conn.
type wsConn struct {
	c   *websocket.Conn
	raw net.Conn // the connection beneath c, for a crash's frame cut short
}

var errBinary = errors.New("mockserver: text messages only")

func (c *wsConn) ReadMessage(ctx context.Context) ([]byte, error) {
	typ, data, err := c.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		c.c.Close(websocket.StatusUnsupportedData, "text messages only")
		return nil, errBinary
	}
	return data, nil
}

func (c *wsConn) WriteMessage(frame []byte) error {
	return c.c.Write(context.Background(), websocket.MessageText, frame) // closing the connection unblocks a write
}

// WriteBytes implements mcpserver.RawWriter: bytes on the connection
// beneath the WebSocket (the library has flushed every message it wrote).
func (c *wsConn) WriteBytes(b []byte) error {
	if c.raw == nil {
		return errors.New("mockserver: no raw connection")
	}
	_, err := c.raw.Write(b)
	return err
}

func (c *wsConn) Close() error { return c.c.CloseNow() }
