package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Tracing is off unless the OTEL_* variables ask for it; a request for an
// exporter or protocol the command lacks is a typed error.
func TestTracingFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		proto   string
		wantErr bool
	}{
		{name: "nothing set", env: nil},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true, proto: "http/protobuf"},
		{name: "a traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true, proto: "http/protobuf"},
		{name: "otlp exporter, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, proto: "http/protobuf"},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: "grpc"},
		{name: "the traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, proto: "http/protobuf"},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := tracingFromEnv(context.Background(), func(k string) string { return tc.env[k] })
			if tc.wantErr {
				assert.ErrorIs(t, err, errTracingConfig)
				assert.Nil(t, tr.tracerProvider())
				return
			}
			require.NoError(t, err)
			defer func() { _ = tr.shutdown(context.Background()) }()
			if !tc.on {
				assert.Nil(t, tr.tracerProvider(), "off: no provider (not a typed nil)")
				return
			}
			require.NotNil(t, tr.provider)
			assert.Equal(t, tc.proto, tr.protocol)
		})
	}
}

// spanSink keeps the spans an OTLP receiver got.
type spanSink struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func newSpanSink() *spanSink { return &spanSink{} }

func (s *spanSink) add(req *collectortrace.ExportTraceServiceRequest) {
	s.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				s.services = append(s.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			s.spans = append(s.spans, ss.GetSpans()...)
		}
	}
	s.mu.Unlock()
}

func (s *spanSink) snapshot() ([]*tracepb.Span, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.Span(nil), s.spans...), append([]string(nil), s.services...)
}

// serveOTLPHTTP is an OTLP/HTTP (protobuf) receiver on loopback; it
// returns its endpoint.
func serveOTLPHTTP(t *testing.T, sink *spanSink) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sink.add(&req)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// grpcReceiver is an OTLP/gRPC trace receiver.
type grpcReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	sink *spanSink
}

func (g grpcReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.sink.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveOTLPGRPC is an OTLP/gRPC receiver on loopback; it returns its
// endpoint.
func serveOTLPGRPC(t *testing.T, sink *spanSink) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(s, grpcReceiver{sink: sink})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done // testwait:ok Stop closes the listener and every connection: Serve returns
	})
	return "http://" + ln.Addr().String()
}

// `mcpvisor supervise` with the OTEL_* variables set exports, over OTLP
// (HTTP and gRPC), the gateway's server span of a call continuing the
// caller's trace and the supervisor's client span of the upstream
// request, under service.name mcpvisor; the last spans are exported when
// it exits.
func TestSuperviseExportsTraces(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			sink := newSpanSink()
			endpoint := ""
			if proto == "grpc" {
				endpoint = serveOTLPGRPC(t, sink)
			} else {
				endpoint = serveOTLPHTTP(t, sink)
			}
			dir := t.TempDir()
			bin := filepath.Join(dir, "mcpvisor")
			copyBinary(t, bin)
			cfg := writeConfig(t, map[string]any{"a": mock(bin, "-name", "a")})
			cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
			cmd.Env = cliEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL="+proto,
				"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=")
			p := startLogged(t, cmd)
			base := gatewayURL(t, p.logs)

			// A host calls through the gateway with its trace context.
			host, err := mcpvisor.Start(t.Context(), mcpvisor.Options{})
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				assert.NoError(t, host.Close(ctx))
			}()
			_, err = host.SetServers(t.Context(), map[string]mcpvisor.ServerConfig{
				"gw": {Config: transports.Config{Type: transports.TypeHTTP, URL: base + "/mcp"}},
			}, mcpvisor.AwaitSettled(30*time.Second))
			require.NoError(t, err)
			const traceID, parentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var res *protocol.CallToolResult
			for ctx.Err() == nil { // the gateway's pool may lag its servers' readiness
				res, err = host.CallToolWith(ctx, "mcp__gw__a__echo", map[string]any{"text": "hi"}, mcpvisor.CallOptions{
					Meta: protocol.Meta{"traceparent": json.RawMessage(`"00-` + traceID + `-` + parentSpan + `-01"`)},
				})
				if err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			require.NoError(t, err)
			require.False(t, res.IsError)

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, p.wait(t), "exit status 0 after SIGTERM; log:\n%s", p.logs)
			assert.Contains(t, p.logs.String(), "tracing on")

			spans, services := sink.snapshot()
			byName := map[string]*tracepb.Span{}
			var names []string
			for _, s := range spans {
				names = append(names, s.GetName())
				if hexOf(s.GetTraceId()) == traceID {
					byName[s.GetName()] = s
				}
			}
			server, client := byName["tools/call a__echo"], byName["tools/call echo"]
			require.NotNil(t, server, "the gateway's server span of the caller's trace among %v", names)
			require.NotNil(t, client, "the supervisor's client span of the caller's trace among %v", names)
			assert.Equal(t, parentSpan, hexOf(server.GetParentSpanId()))
			assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, server.GetKind())
			assert.Equal(t, hexOf(server.GetSpanId()), hexOf(client.GetParentSpanId()))
			assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, client.GetKind())
			assert.Contains(t, names, "mcpvisor.connect", "the connect span")
			assert.Contains(t, services, "mcpvisor")
		})
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
