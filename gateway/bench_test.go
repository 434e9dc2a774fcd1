package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// stubBackend answers every call at once with a fixed result: it measures
// the gateway's own code.
type stubBackend struct{ gateway.Backend }

func (stubBackend) CallTool(context.Context, string, any) (*protocol.CallToolResult, error) {
	return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("0123456789abcdef")}}, nil
}

func (stubBackend) Tools() []mcpvisor.Tool { return nil }

func (stubBackend) ListPrompts(string) ([]mcpvisor.Prompt, error) { return nil, nil }

func (stubBackend) Subscribe(ctx context.Context, _ ...mcpvisor.SubscribeOption) <-chan mcpvisor.Event {
	ch := make(chan mcpvisor.Event)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

// BenchmarkGatewayHandler measures the gateway's HTTP handler alone
// serving one tools/call in process (no network, a backend that answers
// at once): the CPU the gateway spends per call.
func BenchmarkGatewayHandler(b *testing.B) {
	benchHandler(b, gateway.Options{}, "")
}

// BenchmarkGatewayHandlerStateless is BenchmarkGatewayHandler for a
// stateless-era (2026-07-28) client that declares no capabilities: each
// request carries its _meta and headers, and no session.
func BenchmarkGatewayHandlerStateless(b *testing.B) {
	g, _ := serve(b, stubBackend{}, gateway.Options{})
	h := g.Handler()
	body := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"}},` +
		`"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, gateway.MCPPath, bytes.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", protocol.Version20260728)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "mcp__m__echo")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "0123456789abcdef") {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}

// BenchmarkGatewayHandlerTraced is BenchmarkGatewayHandler with tracing
// on (every span recorded, batched to an exporter that discards) and a
// traceparent in each request's _meta: the cost of the server span.
func BenchmarkGatewayHandlerTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	benchHandler(b, gateway.Options{TracerProvider: tp}, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)
}

// benchHandler measures tools/call requests, with meta as their _meta
// (none when empty), served by a gateway with opts in process.
func benchHandler(b *testing.B, opts gateway.Options, meta string) {
	g, _ := serve(b, stubBackend{}, opts)
	h := g.Handler()
	init := httptest.NewRequest(http.MethodPost, gateway.MCPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
	init.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, init)
	sid := rec.Header().Get("Mcp-Session-Id")
	if sid == "" {
		b.Fatal("no session")
	}
	if meta != "" {
		meta = `"_meta":` + meta + `,`
	}
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + meta + `"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, gateway.MCPPath, bytes.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}

// BenchmarkGatewayOverhead measures one tools/call (echo, 16 bytes) made
// sequentially by an mcpvisor client: straight to a stdio mock server
// ("direct"), and through the gateway over Streamable HTTP on loopback
// (the host's supervisor → gateway → the gateway's supervisor → the same
// kind of server) in both eras. The difference of the p50s is what the
// gateway adds. Reports p50-µs and p99-µs of the calls timed.
func BenchmarkGatewayOverhead(b *testing.B) {
	ctx := context.Background()
	servers := map[string]mcpvisor.ServerConfig{"m": {Config: mockserver.Command("-name", "m")}}
	args := json.RawMessage(`{"text":"0123456789abcdef"}`)

	run := func(b *testing.B, sup *mcpvisor.Supervisor, tool string) {
		for range 200 { // warm up
			if _, err := sup.CallTool(ctx, tool, args); err != nil {
				b.Fatal(err)
			}
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			if _, err := sup.CallTool(ctx, tool, args); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}

	b.Run("direct-stdio", func(b *testing.B) {
		sup := benchSupervisor(b, servers)
		run(b, sup, "mcp__m__echo")
	})
	// One Streamable HTTP hop on loopback to the mock server, for
	// comparison: what any HTTP hop costs this client.
	b.Run("direct-http", func(b *testing.B) {
		ms, err := mockserver.Serve(ctx, mockserver.Options{Name: "m", Transport: mockserver.TransportHTTP, Listen: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		defer ms.Close()
		sup := benchSupervisor(b, map[string]mcpvisor.ServerConfig{"m": {Config: transports.Config{Type: "http", URL: ms.URL}, ProtocolVersion: protocol.Version20251125}})
		run(b, sup, "mcp__m__echo")
	})
	for _, version := range []string{protocol.Version20251125, protocol.Version20260728} {
		b.Run("gateway-http-"+version, func(b *testing.B) {
			up := benchSupervisor(b, servers)
			_, srv := serve(b, up, gateway.Options{})
			host := benchSupervisor(b, map[string]mcpvisor.ServerConfig{
				"gw": {Config: httpConfig(srv.URL), ProtocolVersion: version},
			})
			run(b, host, "mcp__gw__m__echo")
		})
	}
}

// BenchmarkLoopbackHTTPEcho is the floor of one HTTP hop on this machine:
// a net/http client POSTs a tools/call-sized body to a net/http server on
// loopback that echoes it. Compare its p50 with what the gateway adds.
func BenchmarkLoopbackHTTPEcho(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	client := srv.Client()
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__m__echo","arguments":{"text":"0123456789abcdef"}}}`)
	call := func() {
		resp, err := client.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 200 {
		call()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		call()
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}
