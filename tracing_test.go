package mcpvisor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// tracedServers are test servers over stdio, Streamable HTTP and
// WebSocket, in both eras: the trace context goes into _meta whatever
// the server speaks.
func tracedServers(t *testing.T) map[string]mcpvisor.ServerConfig {
	_, url := testserver.Serve(t, testserver.Options{})
	wsURL := serveWebSocket(t)
	return map[string]mcpvisor.ServerConfig{
		"stdio":     {Config: testserver.Command()},
		"stdio_old": {Config: testserver.Command(), ProtocolVersion: protocol.Version20251125},
		"http":      {Config: transports.Config{URL: url}},
		"http_old":  {Config: transports.Config{URL: url}, ProtocolVersion: protocol.Version20250618},
		"ws":        {Config: transports.Config{Type: transports.TypeWS, URL: wsURL}},
		"ws_old":    {Config: transports.Config{Type: transports.TypeWS, URL: wsURL}, ProtocolVersion: protocol.Version20251125},
	}
}

// tracedServerNames are the names of tracedServers.
var tracedServerNames = []string{"stdio", "stdio_old", "http", "http_old", "ws", "ws_old"}

// serveWebSocket serves a test server over WebSocket (subprotocol mcp,
// one text message per JSON-RPC message) on 127.0.0.1 and returns its
// ws:// URL; it ends with the test.
func serveWebSocket(t *testing.T) string {
	s := testserver.New(testserver.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"mcp"}})
		if err != nil {
			return // Accept has answered
		}
		// The request's context ends with the upgrade's handler; the
		// connection ends when the client closes it or the test ends.
		_ = s.MCP().ServeConn(context.Background(), wsConn{c})
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		s.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// wsConn is a WebSocket as an mcpserver.Conn.
type wsConn struct{ c *websocket.Conn }

func (w wsConn) ReadMessage(ctx context.Context) ([]byte, error) {
	_, data, err := w.c.Read(ctx)
	return data, err
}

func (w wsConn) WriteMessage(frame []byte) error {
	return w.c.Write(context.Background(), websocket.MessageText, frame) // closing the connection unblocks a write
}

func (w wsConn) Close() error { return w.c.CloseNow() }

// startTraced starts a supervisor with tp (nil: no tracing) and servers,
// all ready.
func startTraced(t *testing.T, tp trace.TracerProvider, servers map[string]mcpvisor.ServerConfig) *mcpvisor.Supervisor {
	t.Helper()
	sup, err := mcpvisor.Start(t.Context(), mcpvisor.Options{TracerProvider: tp})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(t.Context(), servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	for _, st := range sup.Status() {
		require.Equal(t, mcpvisor.StateReady, st.State, "%s: %s", st.Name, st.LastError)
	}
	return sup
}

// metaOf calls server's meta tool under ctx (with meta added to the
// request's _meta) and returns the _meta the server received.
func metaOf(t *testing.T, ctx context.Context, sup *mcpvisor.Supervisor, server string, meta protocol.Meta) map[string]json.RawMessage {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := sup.CallToolWith(cctx, "mcp__"+server+"__meta", map[string]any{}, mcpvisor.CallOptions{Meta: meta})
	require.NoError(t, err, server)
	require.Len(t, res.Content, 1, server)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &got), "%s: %s", server, res.Content[0].Text)
	return got
}

// A call under a parent span is recorded as a client span, child of the
// parent, with the semantic conventions' attributes; the request's
// _meta.traceparent is that span's context (the parent's trace id), once,
// replacing any the caller set. Over stdio, HTTP and WebSocket, in both
// eras.
func TestCallToolCarriesTraceContext(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sup := startTraced(t, tp, tracedServers(t))

	for _, server := range tracedServerNames {
		t.Run(server, func(t *testing.T) {
			ctx, parent := tp.Tracer("test").Start(t.Context(), "parent")
			callerMeta := protocol.Meta{
				"traceparent": json.RawMessage(`"00-11111111111111111111111111111111-2222222222222222-01"`),
				"x":           json.RawMessage(`1`),
			}
			got := metaOf(t, ctx, sup, server, callerMeta)
			parent.End()

			var tp string
			require.True(t, protocol.Meta(got).Get("traceparent", &tp), "the request's _meta has a traceparent: %v", got)
			fields := strings.Split(tp, "-")
			require.Len(t, fields, 4, tp)
			assert.Equal(t, parent.SpanContext().TraceID().String(), fields[1], "the upstream request continues the caller's trace")
			assert.JSONEq(t, `1`, string(got["x"]), "the caller's other _meta keys go with it")

			span := findSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool {
				return s.Name() == "tools/call meta" && s.SpanContext().SpanID().String() == fields[2]
			})
			assert.Equal(t, trace.SpanKindClient, span.SpanKind())
			assert.Equal(t, parent.SpanContext().SpanID(), span.Parent().SpanID(), "the client span's parent is the caller's span")
			attrs := attrMap(span)
			assert.Equal(t, "tools/call", attrs["mcp.method.name"])
			assert.Equal(t, "meta", attrs["gen_ai.tool.name"])
			assert.Equal(t, "execute_tool", attrs["gen_ai.operation.name"])
			assert.Equal(t, server, attrs["mcpvisor.server.name"])
			assert.NotEmpty(t, attrs["mcp.protocol.version"])
			assert.NotEmpty(t, attrs["jsonrpc.request.id"])
			assert.NotContains(t, attrs, "error.type")
			if !strings.HasPrefix(server, "stdio") {
				assert.Equal(t, "tcp", attrs["network.transport"])
				assert.Equal(t, "127.0.0.1", attrs["server.address"])
			} else {
				assert.Equal(t, "pipe", attrs["network.transport"])
			}
			if server == "http_old" {
				assert.NotEmpty(t, attrs["mcp.session.id"], "a handshake-era HTTP session has an id")
			}
		})
	}

	t.Run("connect spans", func(t *testing.T) {
		for _, server := range tracedServerNames {
			span := findSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool {
				return s.Name() == "mcpvisor.connect" && attrMap(s)["mcpvisor.server.name"] == server
			})
			attrs := attrMap(span)
			assert.Equal(t, "0", attrs["mcpvisor.connect.attempt"], server)
			assert.NotEmpty(t, attrs["mcp.protocol.version"], server)
			// The connect's own requests are its children.
			child := findSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool {
				return s.Name() == "tools/list" && s.Parent().SpanID() == span.SpanContext().SpanID()
			})
			assert.Equal(t, span.SpanContext().TraceID(), child.SpanContext().TraceID(), server)
		}
	})

	t.Run("a failed tool is a tool_error", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		res, err := sup.CallTool(cctx, "mcp__stdio__fail", map[string]any{})
		require.NoError(t, err)
		require.True(t, res.IsError)
		span := findSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "tools/call fail" })
		assert.Equal(t, "tool_error", attrMap(span)["error.type"])
	})

	t.Run("a JSON-RPC error is its code", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := sup.Resources().Read(cctx, "stdio", "test://nowhere")
		require.Error(t, err)
		span := findSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "resources/read" })
		attrs := attrMap(span)
		var rpcErr *protocol.Error
		require.ErrorAs(t, err, &rpcErr)
		assert.Equal(t, attrs["rpc.response.status_code"], attrs["error.type"])
		assert.NotEmpty(t, attrs["error.type"])
		assert.Equal(t, "test://nowhere", attrs["mcp.resource.uri"])
	})
}

// Without a tracer provider no trace key goes into _meta (a caller's own
// ones pass as they are), whatever span the caller's context holds.
func TestNoTracerAddsNoTraceKeys(t *testing.T) {
	t.Parallel()
	sup := startTraced(t, nil, tracedServers(t))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, parent := tp.Tracer("test").Start(t.Context(), "parent")
	defer parent.End()
	for _, server := range tracedServerNames {
		got := metaOf(t, ctx, sup, server, nil)
		for _, k := range protocol.TraceMetaKeys {
			assert.NotContains(t, got, k, "%s: no tracer, no %s: %v", server, k, got)
		}
		got = metaOf(t, ctx, sup, server, protocol.Meta{"traceparent": json.RawMessage(`"caller's"`)})
		assert.JSONEq(t, `"caller's"`, string(got["traceparent"]), "%s: a caller's traceparent passes untouched", server)
	}
}

// findSpan returns the one recorded span that match says, failing the test
// when none or several are.
func findSpan(t *testing.T, rec *tracetest.SpanRecorder, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if match(s) {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "one matching span among the ended ones: %v", names)
	return found[0]
}

// attrMap returns a span's attributes as strings.
func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}
