package gateway

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/internal/mcptrace"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The gateway's server spans (Options.TracerProvider): one span of kind
// server per request a downstream client sends, following the
// OpenTelemetry semantic conventions for MCP. Its parent is the trace
// context the request carries in params._meta (traceparent, tracestate,
// baggage: SEP-414), so that a client's trace goes on through the
// gateway; the supervisor's client span of the upstream request is its
// child, and that request's _meta carries the client span's context in
// place of the caller's (see the session package's Tracing).

// instrumentationName names the gateway's tracer.
const instrumentationName = "github.com/mcpvisor/mcpvisor/gateway"

// newServerTracer returns the gateway's tracer of tp, or nil for none.
func newServerTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(instrumentationName)
}

// startServerSpan starts the server span of request m of session s, its
// parent the trace context of m's _meta. It returns ctx and nil when the
// gateway traces nothing.
func (g *Gateway) startServerSpan(ctx context.Context, s *session, m *protocol.Message) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, nil
	}
	ctx = mcptrace.Extract(ctx, m.Params)
	name, attrs := serverSpanStart(s, m)
	return g.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// serverSpanStart returns the name and attributes of the span of request
// m of session s: the method, the tool or prompt (by the name the client
// used), the resource, the session, the version and the transport.
func serverSpanStart(s *session, m *protocol.Message) (string, []attribute.KeyValue) {
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, mcptrace.MethodName.String(m.Method), mcptrace.RequestID.String(m.ID.String()))
	if s.id != "" {
		attrs = append(attrs, mcptrace.SessionID.String(s.id))
	}
	s.mu.Lock()
	version := s.version
	s.mu.Unlock()
	if version != "" {
		attrs = append(attrs, mcptrace.ProtocolVersion.String(version))
	}
	if s.out != nil || s.stateless != nil {
		attrs = append(attrs, mcptrace.NetworkTransport.String("tcp"), attribute.String("network.protocol.name", "http"))
	} else {
		attrs = append(attrs, mcptrace.NetworkTransport.String("pipe"))
	}
	name := m.Method
	switch m.Method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
		target, _ := protocol.PlainStringMember(m.Params, "name")
		if target == "" {
			break
		}
		name += " " + target
		if m.Method == protocol.MethodToolsCall {
			attrs = append(attrs, mcptrace.ToolName.String(target), mcptrace.OperationName.String(mcptrace.OperationExecuteTool))
		} else {
			attrs = append(attrs, mcptrace.PromptName.String(target))
		}
	case protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		if uri, ok := protocol.PlainStringMember(m.Params, "uri"); ok {
			attrs = append(attrs, mcptrace.ResourceURI.String(uri))
		}
	}
	return name, attrs
}

// endServerSpan ends span (when not nil) with the answer the gateway
// sends: a JSON-RPC error's code is error.type, a tools/call result with
// isError set is a "tool_error", and a request the client cancelled
// (answered with nothing) is "cancelled".
func endServerSpan(ctx context.Context, span trace.Span, method string, frame []byte, code int64) {
	if span == nil {
		return
	}
	defer span.End()
	switch {
	case code != 0:
		c := strconv.FormatInt(code, 10)
		span.SetAttributes(mcptrace.ErrorType.String(c), mcptrace.ResponseStatusCode.String(c))
		msg := ""
		if e, found, _ := protocol.RawMember(frame, "error"); found {
			msg, _ = protocol.PlainStringMember(e, "message")
		}
		span.SetStatus(codes.Error, msg)
	case frame == nil && ctx.Err() != nil:
		span.SetAttributes(mcptrace.ErrorType.String("cancelled"))
		span.SetStatus(codes.Error, "cancelled")
	case method == protocol.MethodToolsCall:
		if res, found, _ := protocol.RawMember(frame, "result"); found {
			if v, found, _ := protocol.RawMember(res, "isError"); found && string(v) == "true" {
				span.SetAttributes(mcptrace.ErrorType.String(mcptrace.ErrorTypeToolError))
				span.SetStatus(codes.Error, mcptrace.ErrorTypeToolError)
			}
		}
	}
}
