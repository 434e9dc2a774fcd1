package streamable

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// TestDeletesTakeTurnsPerHost: with one slot per host, a second
// session's DELETE waits for the first one's; one that gets no slot
// before its deadline is skipped (Close still returns), and the server
// never sees it.
func TestDeletesTakeTurnsPerHost(t *testing.T) {
	var sessions atomic.Int32
	deleting := make(chan string, 2)
	release := make(chan struct{})
	var mu sync.Mutex
	var deleted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			sid := r.Header.Get("Mcp-Session-Id")
			mu.Lock()
			deleted = append(deleted, sid)
			mu.Unlock()
			deleting <- sid
			select { // the first DELETE is held until the test lets it go
			case <-release:
			case <-r.Context().Done():
			}
			return
		case http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := decodeBody(t, r)
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", sessions.Add(1)))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(m.ID, `{}`))
	}))
	defer srv.Close()
	limiter := NewEndLimiter(1)
	a, _ := dial(t, srv.URL, Options{EndLimiter: limiter, DeleteTimeout: 10 * time.Second})
	b, _ := dial(t, srv.URL, Options{EndLimiter: limiter, DeleteTimeout: 200 * time.Millisecond})
	require.NoError(t, a.Send(testwait.Context(t), request(1, "initialize", "")))
	require.NoError(t, b.Send(testwait.Context(t), request(1, "initialize", "")))

	closedA := make(chan error, 1)
	go func() { closedA <- a.Close(testwait.Context(t)) }()
	assert.Equal(t, "s1", testwait.Recv(t, deleting, "the first session's DELETE"))
	require.NoError(t, b.Close(testwait.Context(t)), "a DELETE without a slot is skipped at its deadline")
	close(release)
	require.NoError(t, testwait.Recv(t, closedA, "the first session's Close"))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"s1"}, deleted, "the second DELETE waited for the host's one slot and was skipped")
	limiter.mu.Lock()
	defer limiter.mu.Unlock()
	assert.Empty(t, limiter.hosts, "a host's slots are forgotten once nobody holds or waits for them")
}
