package session_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors/session"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// post is one POST the HTTP peer received.
type post struct {
	header http.Header
	msg    *protocol.Message
}

// httpPeer is the mock server's Streamable HTTP handler on a loopback
// listener, behind a hook that sees every POST first: it may answer the
// request itself (returning true), as a server with a particular
// behaviour would, or let the mock answer. Every POST is recorded.
type httpPeer struct {
	srv  *httptest.Server
	mock http.Handler

	mu    sync.Mutex
	posts []post
	hook  func(w http.ResponseWriter, p post) bool // guarded by mu
}

func newHTTPPeer(t *testing.T, o mockserver.Options) *httpPeer {
	t.Helper()
	o.Transport = mockserver.TransportHTTP
	mock, err := mockserver.NewHandler(o)
	require.NoError(t, err)
	p := &httpPeer{mock: mock}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		_ = mock.(io.Closer).Close()
		p.srv.Close()
	})
	return p
}

func (p *httpPeer) url() string { return p.srv.URL + "/mcp" }

// setHook installs the hook (nil: none).
func (p *httpPeer) setHook(h func(w http.ResponseWriter, p post) bool) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

// received returns the POSTs so far.
func (p *httpPeer) received() []post {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]post(nil), p.posts...)
}

func (p *httpPeer) serve(w http.ResponseWriter, r *http.Request) {
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
	rec := post{header: r.Header.Clone(), msg: msg}
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

// openHTTP opens a session with the peer over Streamable HTTP.
func openHTTP(t *testing.T, p *httpPeer, opts session.Options) (*session.Session, error) {
	t.Helper()
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = protocol.Implementation{Name: "mcpvisor-test", Version: "0"}
	}
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		return streamable.Dial(ctx, transports.Config{Type: transports.TypeHTTP, URL: p.url()}, streamable.Options{}, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Open(ctx, dial, opts)
	if s != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx, nil)
		})
	}
	return s, err
}

// writeJSON answers a POST with a JSON body and status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
