package mcpvisor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The secrets a config carries, one per place, each told apart so that a
// leak names its place.
const (
	secretQuery  = "sQUERY-9f31c7"
	secretUser   = "sUSER-4b72a0"
	secretPass   = "sPASS-1de8e5"
	secretHeader = "sHEADER-77c2f1"
	secretEnv    = "sENV-30a9bd"
	secretArg    = "sARG-c6e0d4"
)

var allSecrets = []string{secretQuery, secretUser, secretPass, secretHeader, secretEnv, secretArg}

// lockedBuffer is a log sink the supervisor's goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// refusedPort returns a loopback address nothing listens on.
func refusedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// answering serves every request with status (and a WWW-Authenticate
// challenge on a 401), quoting the request's URL and credentials in its
// body as careless error pages do; it never upgrades a WebSocket
// handshake.
func answering(t *testing.T, status int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
		}
		http.Error(w, fmt.Sprintf("no: %s %s %s", r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")), status)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// withSecrets is the URL of scheme://hostport/path with a user name and
// password and an api_key in its query.
func withSecrets(scheme, hostport, path string) string {
	u := url.URL{Scheme: scheme, User: url.UserPassword(secretUser, secretPass), Host: hostport, Path: path,
		RawQuery: url.Values{"api_key": {secretQuery}}.Encode()}
	return u.String()
}

// No secret of a server's config reaches an error, a status, an event, a
// span or a log line (at trace level) when the server fails, over every
// transport and every way of failing: a refused port, a 500, a 401, a
// WebSocket handshake that is not one, and a stdio command that exits
// printing to stderr. The secrets sit in the URL's query and user info,
// in a header, in an env value and in an argument; the failing servers
// repeat them (an error page quoting the request, a usage message
// quoting the arguments), and what they say is quoted with the secrets
// scrubbed.
func TestNoSecretInFailures(t *testing.T) {
	ctx := testwait.Context(t)
	logs := &lockedBuffer{}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Logger:         zerolog.New(logs).Level(zerolog.TraceLevel),
		TracerProvider: tp,
		Reconnect:      mcpvisor.ReconnectPolicy{MaxAttempts: -1}, // park at the first failure
		ConnectTimeout: 10 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(cctx))
	})
	events := sup.Subscribe(ctx, mcpvisor.FromSequence(0), mcpvisor.BufferSize(4096))

	header := map[string]string{"Authorization": "Bearer " + secretHeader, "X-Api-Key": secretHeader}
	env := map[string]string{"API_KEY": secretEnv}
	remote := func(typ transports.Type, scheme, hostport string) mcpvisor.ServerConfig {
		return mcpvisor.ServerConfig{Config: transports.Config{Type: typ, URL: withSecrets(scheme, hostport, "/mcp"), Headers: header}}
	}
	refused, status500, status401 := refusedPort(t), answering(t, http.StatusInternalServerError), answering(t, http.StatusUnauthorized)
	servers := map[string]mcpvisor.ServerConfig{
		"http-refused": remote(transports.TypeHTTP, "http", refused),
		"http-500":     remote(transports.TypeHTTP, "http", status500),
		"http-401":     remote(transports.TypeHTTP, "http", status401),
		"sse-refused":  remote(transports.TypeSSE, "http", refused),
		"sse-500":      remote(transports.TypeSSE, "http", status500),
		"sse-401":      remote(transports.TypeSSE, "http", status401),
		"ws-refused":   remote(transports.TypeWS, "ws", refused),
		"ws-500":       remote(transports.TypeWS, "ws", status500),
		"ws-401":       remote(transports.TypeWS, "ws", status401),
		"ws-handshake": remote(transports.TypeWS, "ws", answering(t, http.StatusOK)),
		"stdio-exits": {Config: transports.Config{Command: "/bin/sh",
			// It repeats its key and arguments, as usage messages do.
			Args: []string{"-c", `echo "server failed to start: key $API_KEY rejected; usage: server $*" >&2; exit 3`, "sh", "--api-key", secretArg, "--token=" + secretArg},
			Env:  env}},
	}

	var surfaces []string // every text a host may show
	add := func(what string, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		surfaces = append(surfaces, what+": "+string(b))
	}
	addErr := func(what string, err error) {
		if err != nil {
			surfaces = append(surfaces, fmt.Sprintf("%s: %v", what, err))
		}
	}
	res, err := sup.SetServers(ctx, servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	addErr("SetServers", err)
	add("SetServers result", res)
	for name := range res.Errors {
		addErr("SetServers error "+name, res.Errors[name])
	}
	for name, cfg := range servers {
		st, err := sup.Server(name).Status()
		require.NoError(t, err)
		assert.True(t, st.State.Parked(), "%s: %s (%s)", name, st.State, st.LastError)
		assert.NotEmpty(t, st.LastError, name)
		add("status "+name, st)
		surfaces = append(surfaces, "last error "+name+": "+st.LastError)
		_, err = sup.Server(name).CallTool(ctx, "echo", nil)
		require.Error(t, err, name)
		addErr("call "+name, err)
		st, err = sup.Connect(ctx, name, cfg) // connect again: fails again
		addErr("connect "+name, err)
		add("connect status "+name, st)
		addErr("ping "+name, sup.Server(name).Ping(ctx))
	}
	add("Status", sup.Status())

	// The events so far: every state change of every server.
	seq, err := sup.LastSeq(ctx)
	require.NoError(t, err)
	for got := uint64(0); got < seq; {
		select {
		case ev := <-events:
			add("event", ev)
			got = ev.Header().Seq
		case <-ctx.Done():
			t.Fatalf("events up to %d: %v", seq, ctx.Err())
		}
	}
	for _, sp := range rec.Ended() {
		add("span "+sp.Name(), map[string]any{"attributes": sp.Attributes(), "events": sp.Events(), "status": sp.Status()})
	}
	require.NotEmpty(t, rec.Ended(), "connect spans were recorded")
	surfaces = append(surfaces, "logs: "+logs.String())

	// The failures were seen (the search below is not over empty text),
	// and their errors name where they went.
	all := strings.Join(surfaces, "\n")
	assert.Contains(t, all, "127.0.0.1", "errors name the host")
	assert.Contains(t, all, "server failed to start: key [redacted] rejected; usage: server --api-key [redacted] --token=[redacted]",
		"stdio's stderr is shown, scrubbed")
	assert.Contains(t, all, "answered 500 Internal Server Error: no: /mcp?api_key=[redacted] [redacted] [redacted]",
		"an error page is shown, scrubbed")
	assert.Contains(t, logs.String(), "connection refused", "the log has the failures")
	for _, secret := range allSecrets {
		for _, s := range surfaces {
			if i := strings.Index(s, secret); i >= 0 {
				t.Errorf("secret %s in %s", secret, excerpt(s, i))
			}
		}
	}
}

// excerpt returns s around position i, up to 300 bytes either side.
func excerpt(s string, i int) string {
	from, to := max(0, i-300), min(len(s), i+300)
	return s[from:to]
}
