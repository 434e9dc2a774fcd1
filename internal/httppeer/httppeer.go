// Package httppeer is a test peer: the mock server's Streamable HTTP
// handler (bench/mockserver) on a loopback listener, behind a hook that
// sees every POST first. The hook may answer a request itself, as a
// server with a particular behaviour would (a refused version, a tool
// list with header annotations, a skills catalogue), or let the mock
// answer. Every POST is recorded with its headers.
package httppeer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Post is one POST the peer received.
type Post struct {
	Header http.Header
	Msg    *protocol.Message
}

// Hook may answer a POST: it writes the response and returns true, or
// returns false to let the mock answer.
type Hook func(w http.ResponseWriter, p Post) bool

// Peer is the test server.
//
// Concurrency: requests are served concurrently; mu guards the record and
// the hook.
type Peer struct {
	srv  *httptest.Server
	mock http.Handler

	mu    sync.Mutex
	posts []Post
	hook  Hook
}

// New starts a peer serving the mock with options o (its transport is
// forced to Streamable HTTP) and registers its shutdown with t.Cleanup.
func New(t testing.TB, o mockserver.Options) *Peer {
	t.Helper()
	o.Transport = mockserver.TransportHTTP
	mock, err := mockserver.NewHandler(o)
	if err != nil {
		t.Fatalf("httppeer: %v", err)
	}
	p := &Peer{mock: mock}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		_ = mock.(io.Closer).Close()
		p.srv.Close()
	})
	return p
}

// URL is the MCP endpoint.
func (p *Peer) URL() string { return p.srv.URL + "/mcp" }

// SetHook installs h (nil: none).
func (p *Peer) SetHook(h Hook) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

// Received returns the POSTs so far.
func (p *Peer) Received() []Post {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Post(nil), p.posts...)
}

// Methods returns the methods of the POSTs so far.
func (p *Peer) Methods() []string {
	posts := p.Received()
	out := make([]string, len(posts))
	for i, post := range posts {
		out[i] = post.Msg.Method
	}
	return out
}

func (p *Peer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		p.mock.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msg, err := protocol.Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := Post{Header: r.Header.Clone(), Msg: msg}
	p.mu.Lock()
	p.posts = append(p.posts, rec)
	hook := p.hook
	p.mu.Unlock()
	if hook != nil && hook(w, rec) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mock.ServeHTTP(w, r)
}

// WriteJSON answers with status and a JSON body.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Result answers the request of p with result (a JSON object).
func Result(w http.ResponseWriter, p Post, result string) {
	id, _ := json.Marshal(p.Msg.ID)
	WriteJSON(w, http.StatusOK, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

// Error answers the request of p with a JSON-RPC error and HTTP status.
func Error(w http.ResponseWriter, p Post, status int, code int64, message string, data string) {
	id, _ := json.Marshal(p.Msg.ID)
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q`, id, code, message)
	if data != "" {
		body = fmt.Appendf(body, `,"data":%s`, data)
	}
	WriteJSON(w, status, append(body, "}}"...))
}
