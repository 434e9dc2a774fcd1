package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// recorder returns a tracer provider that keeps every span in memory.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// tracedSupervisor starts a supervisor tracing into tp with servers, all
// ready.
func tracedSupervisor(t *testing.T, tp trace.TracerProvider, servers map[string]mcpvisor.ServerConfig) *mcpvisor.Supervisor {
	t.Helper()
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{Logger: zerolog.Nop(), TracerProvider: tp})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), servers, mcpvisor.AwaitSettled(60*time.Second))
	require.NoError(t, err)
	for _, st := range sup.Status() {
		require.Equal(t, mcpvisor.StateReady, st.State, "%s: %s", st.Name, st.LastError)
	}
	return sup
}

// The official TypeScript SDK client calls, with a traceparent in _meta,
// server-everything's echo and a test server's meta tool through the
// gateway. The spans recorded for each call form one connected trace
// under the client's span: the gateway's server span, child of the
// client's; the supervisor's client span, child of the server span. The
// upstream request's _meta carries that trace id, and the gateway's
// client span as parent: the caller's traceparent is replaced, not
// passed on beside it. The caller's tracestate and baggage go on too.
func TestTraceFromTypeScriptClientThroughGateway(t *testing.T) {
	modules := tsModules(t)
	tp, rec := recorder(t)
	sup := tracedSupervisor(t, tp, map[string]mcpvisor.ServerConfig{
		"everything": {Config: transports.Config{Command: everythingBin(t)}},
		"meta":       {Config: testserver.Command()},
	})
	_, srv := serve(t, sup, gateway.Options{TracerProvider: tp})

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	out := runNode(t, modules, "trace.mjs", srv.URL+gateway.MCPPath, "00-"+traceID+"-"+callerSpan+"-01",
		"mcp__everything__echo", "mcp__meta__meta")
	results := map[string]string{}
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "RESULT "); ok {
			name, text, _ := strings.Cut(rest, " ")
			results[name] = text
		}
	}
	require.Contains(t, results["mcp__everything__echo"], "hi", "server-everything echoed: %s", out)

	spans := spansOfTrace(rec, traceID)
	requireConnected(t, spans, callerSpan)
	for _, c := range []struct{ downstream, upstream, server string }{
		{"mcp__everything__echo", "echo", "everything"},
		{"mcp__meta__meta", "meta", "meta"},
	} {
		server := oneSpan(t, spans, "tools/call "+c.downstream)
		assert.Equal(t, trace.SpanKindServer, server.SpanKind())
		assert.Equal(t, callerSpan, server.Parent().SpanID().String(), "the gateway's span continues the client's")
		assert.True(t, server.Parent().IsRemote())
		assert.Equal(t, "ts=1", server.SpanContext().TraceState().String(), "the caller's tracestate")
		sattrs := attributes(server)
		assert.Equal(t, c.downstream, sattrs["gen_ai.tool.name"])
		assert.Equal(t, "tcp", sattrs["network.transport"])
		assert.NotEmpty(t, sattrs["mcp.session.id"])

		client := oneSpan(t, spans, "tools/call "+c.upstream)
		assert.Equal(t, trace.SpanKindClient, client.SpanKind())
		assert.Equal(t, server.SpanContext().SpanID(), client.Parent().SpanID(), "the upstream request's span is the server span's child")
		assert.Equal(t, c.server, attributes(client)["mcpvisor.server.name"])
	}

	// What the upstream server received.
	var meta map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(results["mcp__meta__meta"]), &meta), "the meta tool answers JSON: %s", out)
	var traceparent, baggage string
	require.True(t, protocol.Meta(meta).Get("traceparent", &traceparent), "a traceparent upstream: %v", meta)
	client := oneSpan(t, spans, "tools/call meta")
	assert.Equal(t, "00-"+traceID+"-"+client.SpanContext().SpanID().String()+"-01", traceparent,
		"the upstream traceparent is the downstream trace, with the gateway's client span as parent")
	assert.Equal(t, 1, strings.Count(results["mcp__meta__meta"], "traceparent"), "one traceparent, not the caller's beside it")
	assert.True(t, protocol.Meta(meta).Get("baggage", &baggage))
	assert.Equal(t, "tenant=acme", baggage)
}

// A supervisor tracing its calls to a gateway tracing its own: one trace
// from the host's span through both, whatever era the two speak.
func TestTraceThroughTwoSupervisors(t *testing.T) {
	t.Parallel()
	for _, version := range []string{protocol.Version20251125, protocol.Version20260728} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			tp, rec := recorder(t)
			up := tracedSupervisor(t, tp, map[string]mcpvisor.ServerConfig{"meta": {Config: testserver.Command()}})
			_, srv := serve(t, up, gateway.Options{TracerProvider: tp})
			down := tracedSupervisor(t, tp, map[string]mcpvisor.ServerConfig{
				"gw": {Config: httpConfig(srv.URL), ProtocolVersion: version},
			})

			ctx, host := tp.Tracer("host").Start(t.Context(), "agent turn")
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			res, err := down.CallTool(cctx, "mcp__gw__meta__meta", map[string]any{})
			cancel()
			host.End()
			require.NoError(t, err)
			require.Len(t, res.Content, 1)

			traceID := host.SpanContext().TraceID().String()
			spans := spansOfTrace(rec, traceID)
			requireConnected(t, spans, "")
			hostClient := oneSpan(t, spans, "tools/call meta__meta", trace.SpanKindClient)
			gwServer := oneSpan(t, spans, "tools/call meta__meta", trace.SpanKindServer)
			gwClient := oneSpan(t, spans, "tools/call meta")
			assert.Equal(t, host.SpanContext().SpanID(), hostClient.Parent().SpanID())
			assert.Equal(t, hostClient.SpanContext().SpanID(), gwServer.Parent().SpanID())
			assert.Equal(t, gwServer.SpanContext().SpanID(), gwClient.Parent().SpanID())
			assert.Equal(t, version, attributes(gwServer)["mcp.protocol.version"])
			assert.Contains(t, res.Content[0].Text, gwClient.SpanContext().SpanID().String(), "the server's parent is the gateway's client span")
		})
	}
}

// spansOfTrace returns the ended spans of trace id.
func spansOfTrace(rec *tracetest.SpanRecorder, id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() == id {
			out = append(out, s)
		}
	}
	return out
}

// requireConnected checks that spans form one tree: one root (whose
// parent is root, a remote span id, or none when root is empty), every
// other span the child of one of them.
func requireConnected(t *testing.T, spans []sdktrace.ReadOnlySpan, root string) {
	t.Helper()
	require.NotEmpty(t, spans, "spans of the trace")
	ids := map[trace.SpanID]bool{}
	var names []string
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
		names = append(names, s.Name()+" ("+s.SpanKind().String()+")")
	}
	for _, s := range spans {
		p := s.Parent()
		switch {
		case ids[p.SpanID()]:
		case root != "" && p.SpanID().String() == root:
		case root == "" && !p.IsValid():
		default:
			t.Fatalf("span %q has parent %s, outside the trace; the trace: %v", s.Name(), p.SpanID(), names)
		}
	}
}

// oneSpan returns the one span named name (of kind, when given) among
// spans.
func oneSpan(t *testing.T, spans []sdktrace.ReadOnlySpan, name string, kind ...trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
		if s.Name() == name && (len(kind) == 0 || s.SpanKind() == kind[0]) {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "one span %q among %v", name, names)
	return found[0]
}

// attributes returns a span's attributes as strings.
func attributes(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// tsModules returns the node_modules directory holding the TypeScript
// SDK (make deps installs it into .deps/npm), or skips the test (fails it
// with MCPVISOR_REQUIRE_INTEROP=1).
func tsModules(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../.deps/npm/node_modules")
	if v := os.Getenv("MCPVISOR_NODE_MODULES"); v != "" {
		dir = v
	}
	_, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol", "sdk", "package.json"))
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		interop.Missing(t, "the TypeScript SDK (make deps) or node is missing")
	}
	return dir
}

// everythingBin returns server-everything's binary (make test sets
// MCPVISOR_SERVER_EVERYTHING; else the one make deps installs), or skips
// the test (fails it with MCPVISOR_REQUIRE_INTEROP=1).
func everythingBin(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MCPVISOR_SERVER_EVERYTHING")
	if path == "" {
		path = "../.deps/npm/node_modules/.bin/mcp-server-everything"
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		interop.Missing(t, "server-everything is missing (make npm-deps installs it)")
	}
	return abs
}

// runNode runs testdata/tsclient/<script> with args, from a directory
// whose node_modules is modules, and returns its output; the test fails
// when it does not exit 0.
func runNode(t *testing.T, modules, script string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("../testdata/tsclient", script))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, script), src, 0o644))
	cmd := exec.CommandContext(testwait.Context(t), "node", append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node %s:\n%s", script, out)
	return string(out)
}

// The gateway's server span says how the request ended: a tool's failure
// is a tool_error, a JSON-RPC error its code (and the span's status an
// error), a success has no error.type.
func TestGatewaySpanOutcomes(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	up := tracedSupervisor(t, tp, map[string]mcpvisor.ServerConfig{"meta": {Config: testserver.Command()}})
	_, srv := serve(t, up, gateway.Options{TracerProvider: tp})
	host := tracedSupervisor(t, nil, map[string]mcpvisor.ServerConfig{"gw": {Config: httpConfig(srv.URL)}})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := host.CallTool(ctx, "mcp__gw__meta__fail", map[string]any{})
	require.NoError(t, err)
	require.True(t, res.IsError)
	_, err = host.CallTool(ctx, "mcp__gw__meta__echo", map[string]any{"text": "hi"})
	require.NoError(t, err)
	_, err = host.Resources().Read(ctx, "gw", "test://nowhere")
	var rpcErr *protocol.Error
	require.ErrorAs(t, err, &rpcErr)

	ended := rec.Ended()
	failed := oneSpan(t, ended, "tools/call meta__fail", trace.SpanKindServer)
	assert.Equal(t, "tool_error", attributes(failed)["error.type"])
	assert.Equal(t, codes.Error, failed.Status().Code)
	ok := oneSpan(t, ended, "tools/call meta__echo", trace.SpanKindServer)
	assert.NotContains(t, attributes(ok), "error.type")
	assert.Equal(t, codes.Unset, ok.Status().Code)
	read := oneSpan(t, ended, "resources/read", trace.SpanKindServer)
	code := strconv.FormatInt(rpcErr.Code, 10)
	assert.Equal(t, code, attributes(read)["error.type"])
	assert.Equal(t, code, attributes(read)["rpc.response.status_code"])
	assert.Equal(t, "test://nowhere", attributes(read)["mcp.resource.uri"])
}
