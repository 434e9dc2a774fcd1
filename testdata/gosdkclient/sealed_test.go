package gosdkclient

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// writeKeys writes a --session-keys file: keys[0] seals, the others open
// until their acceptUntil (zero: no end).
func writeKeys(t *testing.T, keys []string, until []time.Time) string {
	t.Helper()
	type key struct {
		Secret      string    `json:"secret"`
		AcceptUntil time.Time `json:"acceptUntil,omitzero"`
	}
	var f struct {
		Keys []key `json:"keys"`
	}
	for i, k := range keys {
		f.Keys = append(f.Keys, key{Secret: k, AcceptUntil: until[i]})
	}
	b, _ := json.Marshal(f)
	path := filepath.Join(t.TempDir(), "session-keys.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// replica is one `mcpvisor supervise` process.
type replica struct {
	cmd  *exec.Cmd
	base string // http://host:port
}

// startReplica runs `mcpvisor supervise` with extra args on an ephemeral
// port. Cleanup stops it (SIGINT), unless the test killed it.
func startReplica(t *testing.T, cfg string, args ...string) *replica {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--state-dir", stateDir}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["message"] == "gateway listening" {
				urls <- fmt.Sprint(m["mcp"])
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("a gateway did not stop within 30 s")
		}
	})
	select {
	case u := <-urls:
		return &replica{cmd: cmd, base: strings.TrimSuffix(u, "/mcp")}
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not start listening")
	}
	return nil
}

// waitReady waits until every configured server of r is ready.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(r.base + "/status")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Count(b, []byte(`"state": "ready"`)) >= 2 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the servers of %s were not ready within 20 s", r.base)
		}
		time.Sleep(50 * time.Millisecond) // polling /status
	}
}

// balancer is a load balancer in front of the replicas: it sends every
// request to one of them (switchable), and counts the initialize
// requests and the GET streams each replica answered.
type balancer struct {
	target      atomic.Pointer[url.URL]
	initializes atomic.Int32
	gets        chan string // the replica of each GET stream answered 200
	url         string
}

func newBalancer(t *testing.T) *balancer {
	t.Helper()
	b := &balancer{gets: make(chan string, 64)}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(b.target.Load())
		},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
				select {
				case b.gets <- resp.Request.URL.Host:
				default:
				}
			}
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				b.initializes.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	b.url = "http://" + ln.Addr().String() + "/mcp"
	return b
}

func (b *balancer) sendTo(r *replica) {
	u, _ := url.Parse(r.base)
	b.target.Store(u)
}

// The official Go SDK's client has a 2025-11-25 session with gateway A
// (behind a load balancer) and makes calls; A is killed with SIGKILL and
// the balancer sends everything to B (same key file, same config, same
// session store). The same client session goes on: its next call is
// answered by B with no new initialize, its GET stream reopens on B, and
// a list_changed on B reaches it there. A forged or altered id gets 404
// from B, and so does the session's id at a gateway whose keys rotated
// the session's key out past its grace period.
func TestSealedSessionSurvivesKill9(t *testing.T) {
	cfg := config(t)
	key := newKey(t)
	keys := writeKeys(t, []string{key}, []time.Time{{}})
	store := t.TempDir()
	a := startReplica(t, cfg, "--session-keys", keys, "--session-store", store)
	b := startReplica(t, cfg, "--session-keys", keys, "--session-store", store)
	a.waitReady(t)
	b.waitReady(t)
	lb := newBalancer(t)
	lb.sendTo(a)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "sealed-proof", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	var sessionID atomic.Value
	httpClient := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			sessionID.Store(id)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: lb.url, HTTPClient: httpClient, MaxRetries: 20},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	add := func(x, y int) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__add", Arguments: map[string]any{"a": x, "b": y}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != fmt.Sprint(x+y) {
			t.Fatalf("add answered %+v", res)
		}
	}
	for i := range 5 {
		add(i, 1)
	}
	select {
	case host := <-lb.gets:
		if host != mustHost(a.base) {
			t.Fatalf("the first GET stream went to %s, not A", host)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the client opened no GET stream on A")
	}

	lb.sendTo(b)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	add(20, 22)
	t.Logf("the first call after kill -9 A was answered by B in %v", time.Since(start))
	if n := lb.initializes.Load(); n != 1 {
		t.Fatalf("%d initialize requests: the session did not survive", n)
	}
	select {
	case host := <-lb.gets:
		if host != mustHost(b.base) {
			t.Fatalf("the reopened GET stream went to %s, not B", host)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client's GET stream did not reopen on B")
	}

	for len(changed) > 0 {
		<-changed // testwait:ok draining what is buffered: len > 0, and no other reader
	}
	name := fmt.Sprintf("late_%d", seq.Add(1))
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__announce", Arguments: map[string]any{"text": name}}); err != nil {
		t.Fatalf("announce: %v", err)
	}
	timeout := time.After(20 * time.Second)
	for found := false; !found; {
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no tools/list_changed on B's GET stream after which a__%s is listed", name)
		}
		lr, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		found = slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "a__"+name })
	}
	if n := lb.initializes.Load(); n != 1 {
		t.Fatalf("%d initialize requests", n)
	}

	id, _ := sessionID.Load().(string)
	if id == "" {
		t.Fatal("the client sent no session id")
	}
	if got := postStatus(t, b.base, id); got != http.StatusOK {
		t.Fatalf("the session's own id at B: HTTP %d", got)
	}
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		t.Fatalf("the session id is not base64url: %v", err)
	}
	raw[len(raw)/2] ^= 0x20
	if got := postStatus(t, b.base, base64.RawURLEncoding.EncodeToString(raw)); got != http.StatusNotFound {
		t.Fatalf("an altered id: HTTP %d, want 404", got)
	}
	if got := postStatus(t, b.base, "0123456789abcdef0123456789abcdef"); got != http.StatusNotFound {
		t.Fatalf("a forged id: HTTP %d, want 404", got)
	}
	rotated := writeKeys(t, []string{newKey(t), key}, []time.Time{{}, time.Now().Add(-time.Minute)})
	c := startReplica(t, cfg, "--session-keys", rotated, "--session-store", store)
	if got := postStatus(t, c.base, id); got != http.StatusNotFound {
		t.Fatalf("an id sealed under a key past its grace period: HTTP %d, want 404", got)
	}
	graced := writeKeys(t, []string{newKey(t), key}, []time.Time{{}, time.Now().Add(time.Hour)})
	d := startReplica(t, cfg, "--session-keys", graced, "--session-store", store)
	if got := postStatus(t, d.base, id); got != http.StatusOK {
		t.Fatalf("an id sealed under a key within its grace period: HTTP %d, want 200", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func mustHost(base string) string {
	u, _ := url.Parse(base)
	return u.Host
}

// postStatus sends a ping of session id to the gateway at base and
// returns the HTTP status.
func postStatus(t *testing.T, base, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
