package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, mcpserver.SealKeySize) }

// whoami answers "test/whoami" with what the session knows of itself,
// and "test/subscribe" by subscribing the session to params.uri.
var whoami = mcpserver.HandlerFunc(func(_ context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
	switch r.Method {
	case "test/whoami":
		w.Reply(map[string]any{
			"version": r.Session.Client().Version, "client": r.Session.Client().Info.Name,
			"roots": r.Session.Client().Capabilities.Roots != nil, "level": r.Session.Client().LogLevel,
			"subs": r.Session.Subscriptions(),
		})
	case "test/subscribe":
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(r.Params, &p)
		r.Session.Subscribe(p.URI)
		w.Reply(map[string]any{})
	default:
		w.Error(protocol.NewError(protocol.CodeMethodNotFound, "no %s", r.Method))
	}
})

// replica serves a Server with seal options o on 127.0.0.1 and counts
// the sessions it restores.
type replica struct {
	url      string
	srv      *mcpserver.Server
	restored atomic.Int32
}

func newReplica(t *testing.T, c *clock, o mcpserver.SealOptions) *replica {
	t.Helper()
	rep := &replica{}
	rep.srv = mcpserver.New(mcpserver.Options{
		Handler:           whoami,
		Now:               c.Now,
		HTTP:              mcpserver.HTTPOptions{Seal: o},
		OnSessionRestored: func(*mcpserver.Session) { rep.restored.Add(1) },
	})
	hs := httptest.NewServer(rep.srv.HTTPHandler())
	t.Cleanup(func() { rep.srv.Close(); hs.Close() })
	rep.url = hs.URL
	return rep
}

// call posts a request of session c to url and returns the HTTP status
// and the decoded result (nil unless 200 with a result).
func (c *pollClient) callAt(url, method, params string) (int, map[string]any) {
	c.t.Helper()
	saved := c.url
	c.url = url
	defer func() { c.url = saved }()
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+params+`}`, nil)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var m struct {
		Result map[string]any  `json:"result"`
		Error  *protocol.Error `json:"error"`
	}
	body := readBody(c.t, resp)
	if i := strings.Index(body, "data: "); i >= 0 { // an event stream
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	require.NoError(c.t, json.Unmarshal([]byte(body), &m), body)
	require.Nil(c.t, m.Error, body)
	return resp.StatusCode, m.Result
}

// A sealed session opened on replica A is served by replica B (same keys,
// same store) with no new initialize: B knows its version, client and
// capabilities from the id, its log level and subscriptions from the
// store, and restores it once. Without keys, B does not know A's session.
func TestSealedSessionMovesToAnotherReplica(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	store := &mcpserver.MemorySessionStore{}
	opts := mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(1)}}, Store: store}
	a, b := newReplica(t, c, opts), newReplica(t, c, opts)

	cl := &pollClient{t: t, url: a.url}
	resp := cl.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"sealed-client","version":"1"}}}`, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cl.session, cl.version = resp.Header.Get(mcpserver.HeaderSessionID), "2025-11-25"
	assert.NotContains(t, cl.session, "sealed-client", "the id is not readable")
	status, _ := cl.callAt(a.url, protocol.MethodLoggingSetLevel, `{"level":"warning"}`)
	require.Equal(t, http.StatusOK, status)
	status, _ = cl.callAt(a.url, "test/subscribe", `{"uri":"demo://one"}`)
	require.Equal(t, http.StatusOK, status)

	for range 2 {
		status, who := cl.callAt(b.url, "test/whoami", `{}`)
		require.Equal(t, http.StatusOK, status, "B serves A's session")
		assert.Equal(t, map[string]any{"version": "2025-11-25", "client": "sealed-client", "roots": true, "level": "warning",
			"subs": []any{"demo://one"}}, who)
	}
	assert.EqualValues(t, 1, b.restored.Load(), "B restored the session once")
	assert.EqualValues(t, 0, a.restored.Load())

	plainA, plainB := newReplica(t, c, mcpserver.SealOptions{}), newReplica(t, c, mcpserver.SealOptions{})
	pl := &pollClient{t: t, url: plainA.url}
	pl.open("2025-11-25")
	assert.Len(t, pl.session, 32, "without keys the id is a random handle")
	status, _ = pl.callAt(plainB.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "without keys B does not know A's session")
}

// A forged or altered id, one sealed under another key, one sealed under
// a rotated-out key past its grace period, and one older than MaxAge are
// all 404, like an unknown session; within the grace period the old key
// still opens.
func TestSealedSessionRefusals(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	old := newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(1)}}, MaxAge: 48 * time.Hour})
	cl := &pollClient{t: t, url: old.url}
	cl.open("2025-11-25")
	id := cl.session

	raw, err := base64.RawURLEncoding.DecodeString(id)
	require.NoError(t, err)
	for _, i := range []int{0, 1, 13, len(raw) / 2, len(raw) - 1} {
		tampered := bytes.Clone(raw)
		tampered[i] ^= 0x01
		cl.session = base64.RawURLEncoding.EncodeToString(tampered)
		status, _ := cl.callAt(old.url, "test/whoami", `{}`)
		assert.Equal(t, http.StatusNotFound, status, "byte %d altered", i)
	}
	for _, forged := range []string{"", "x", strings.Repeat("A", len(id)), base64.RawURLEncoding.EncodeToString(append([]byte{1}, make([]byte, 40)...))} {
		if forged == "" {
			continue
		}
		cl.session = forged
		status, _ := cl.callAt(old.url, "test/whoami", `{}`)
		assert.Equal(t, http.StatusNotFound, status, "forged %q", forged)
	}
	cl.session = id

	other := newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(2)}}})
	status, _ := cl.callAt(other.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "another key does not open it")

	grace := c.Now().Add(time.Hour)
	rotated := newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(2)}, {Secret: key(1), AcceptUntil: grace}}, MaxAge: 48 * time.Hour})
	status, _ = cl.callAt(rotated.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusOK, status, "the old key opens it during its grace period")
	fresh := &pollClient{t: t, url: rotated.url}
	fresh.open("2025-11-25")
	_, err = (mustSealer(t, key(1))).Open(fresh.session, c.Now())
	assert.ErrorIs(t, err, mcpserver.ErrSessionIDInvalid, "new ids are sealed under the new key")
	_, err = (mustSealer(t, key(2))).Open(fresh.session, c.Now())
	assert.NoError(t, err)

	c.Add(2 * time.Hour) // past the grace period
	rotated2 := newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(2)}, {Secret: key(1), AcceptUntil: grace}}, MaxAge: 48 * time.Hour})
	status, _ = cl.callAt(rotated2.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "the old key is refused past its grace period")
	fresh.url = rotated2.url
	status, _ = fresh.callAt(rotated2.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusOK, status, "the new key's ids still open")

	c.Add(47 * time.Hour) // past MaxAge
	status, _ = fresh.callAt(rotated2.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "expired (held in memory)")
	rotated3 := newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(2)}}, MaxAge: 48 * time.Hour})
	status, _ = fresh.callAt(rotated3.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "expired")
	_, err = mustSealer(t, key(2)).Open(fresh.session, c.Now())
	assert.True(t, errors.Is(err, mcpserver.ErrSessionExpired), "%v", err)
}

func mustSealer(t *testing.T, k []byte) *mcpserver.Sealer {
	t.Helper()
	s, err := mcpserver.NewSealer([]mcpserver.SealKey{{Secret: k}}, 48*time.Hour)
	require.NoError(t, err)
	return s
}

// A DELETE on one replica ends the session everywhere: at once on a
// replica that restores it afterwards (the store's deny list), and
// within Recheck on one that holds it in memory. A store that fails is
// answered 503 at once, never waited on.
func TestSealedSessionDeleteReachesEveryReplica(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	store := &mcpserver.DirSessionStore{Dir: t.TempDir()}
	opts := mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(3)}}, Store: store, Recheck: 5 * time.Second}
	a, b, later := newReplica(t, c, opts), newReplica(t, c, opts), newReplica(t, c, opts)
	cl := &pollClient{t: t, url: a.url}
	cl.open("2025-11-25")
	status, _ := cl.callAt(b.url, "test/whoami", `{}`)
	require.Equal(t, http.StatusOK, status)

	cl.url = b.url
	resp := cl.do(http.MethodDelete, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	status, _ = cl.callAt(later.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "a replica that restores it after the DELETE")
	status, _ = cl.callAt(b.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "the replica that deleted it")
	c.Add(6 * time.Second)
	status, _ = cl.callAt(a.url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusNotFound, status, "the replica that held it, after Recheck")

	broken := newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(3)}}, Store: failingStore{}})
	other := &pollClient{t: t, url: broken.url}
	other.open("2025-11-25")
	status, _ = other.callAt(newReplica(t, c, mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(3)}}, Store: failingStore{}}).url, "test/whoami", `{}`)
	assert.Equal(t, http.StatusServiceUnavailable, status, "a failing store is a 503")
}

type failingStore struct{}

var errStoreDown = errors.New("store down")

func (failingStore) Load(context.Context, string) (mcpserver.SessionRecord, error) {
	return mcpserver.SessionRecord{}, errStoreDown
}
func (failingStore) SaveExtras(context.Context, string, mcpserver.SessionExtras, time.Time) error {
	return errStoreDown
}
func (failingStore) Delete(context.Context, string, time.Time) error { return errStoreDown }

// A GET stream opened on the replica that restores a session, with a
// Last-Event-ID numbered by the replica before it, gets what is sent from
// then on (those numbers mean nothing here).
func TestRestoredSessionGetStreamIgnoresForeignEventIDs(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	opts := mcpserver.SealOptions{Keys: []mcpserver.SealKey{{Secret: key(4)}}}
	a, b := newReplica(t, c, opts), newReplica(t, c, opts)
	cl := &pollClient{t: t, url: a.url}
	cl.open("2025-11-25")
	cl.url = b.url
	resp := cl.do(http.MethodGet, "", map[string]string{mcpserver.HeaderLastEventID: "41", "Accept": "text/event-stream"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := testwait.NewLineReader(t, resp.Body)
	require.Equal(t, ": stream", lines.MustLine("the stream's opening comment"))
	require.Len(t, b.srv.Sessions(), 1, "B holds the restored session")
	b.srv.ListChanged(protocol.NotificationToolsListChanged)
	for {
		line := lines.MustLine("the list_changed on the GET stream of B")
		if strings.Contains(line, protocol.NotificationToolsListChanged) {
			break
		}
	}
}
