package mockserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
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
	period := h.period
	h.mu.Unlock()
	defer h.conns.Done()
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
		case <-h.dead:
			c.CloseNow()
		case <-ctx.Done():
		}
	}()

	conn := &wsConn{c: c, raw: hj.conn, garbage: h.o.Garbage}
	p := &peer{conn: conn}
	h.s.hub.add(conn)
	defer h.s.hub.remove(conn)
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

// wsConn is a WebSocket client's output and notification sink. The mutex
// keeps the Garbage fault's messages next to the message they precede,
// and a crash's frame out of any other message.
type wsConn struct {
	c       *websocket.Conn
	raw     net.Conn // the connection beneath c, for crash
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

// crash writes the header of an unfragmented text frame that carries all
// of frame, then the first half of frame, directly on the connection (the
// WebSocket library has flushed every message it wrote); the handler then
// closes the connection.
func (c *wsConn) crash(frame []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.raw == nil {
		return true
	}
	// RFC 6455 §5.2: FIN and opcode 1 (text); a server does not mask.
	head := []byte{0x81}
	switch n := len(frame); {
	case n < 126:
		head = append(head, byte(n))
	case n <= 0xffff:
		head = binary.BigEndian.AppendUint16(append(head, 126), uint16(n))
	default:
		head = binary.BigEndian.AppendUint64(append(head, 127), uint64(n))
	}
	_, _ = c.raw.Write(append(head, frame[:len(frame)/2]...))
	return true
}
