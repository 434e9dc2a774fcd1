package gateway

import (
	"context"
	"encoding/json"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/internal/mcptrace"
	"github.com/mcpvisor/mcpvisor/mcpserver"
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

// middleware returns the gateway's mcpserver middleware: the server span
// (when tracer is not nil) around the request count.
func middleware(tracer trace.Tracer, requests *requestCount) []mcpserver.Middleware {
	if tracer == nil {
		return []mcpserver.Middleware{requests.counted}
	}
	return []mcpserver.Middleware{traced(tracer), requests.counted}
}

// traced returns the middleware that serves each request under its
// server span.
func traced(tracer trace.Tracer) mcpserver.Middleware {
	return func(next mcpserver.Handler) mcpserver.Handler {
		return tracedHandler(tracer, next)
	}
}

func tracedHandler(tracer trace.Tracer, next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		ctx = mcptrace.Extract(ctx, r.Params)
		name, attrs := serverSpanStart(r)
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		rw := &answerRecorder{ResponseWriter: w}
		next.ServeMCP(ctx, rw, r)
		rw.record(ctx, span, r.Method)
	})
}

// serverSpanStart returns the name and attributes of the span of request
// r: the method, the tool or prompt (by the name the client used), the
// resource, the session, the version and the transport.
func serverSpanStart(r *mcpserver.Request) (string, []attribute.KeyValue) {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, mcptrace.MethodName.String(r.Method), mcptrace.RequestID.String(r.ID.String()))
	if id := r.Session.ID(); id != "" {
		attrs = append(attrs, mcptrace.SessionID.String(id))
	}
	version := r.Session.Client().Version
	if r.Meta != nil {
		version = r.Meta.Version
	}
	if version != "" {
		attrs = append(attrs, mcptrace.ProtocolVersion.String(version))
	}
	if r.Header != nil {
		attrs = append(attrs, mcptrace.NetworkTransport.String("tcp"), attribute.String("network.protocol.name", "http"))
	} else {
		attrs = append(attrs, mcptrace.NetworkTransport.String("pipe"))
	}
	name := r.Method
	switch r.Method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
		target, _ := protocol.PlainStringMember(r.Params, "name")
		if target == "" {
			break
		}
		name += " " + target
		if r.Method == protocol.MethodToolsCall {
			attrs = append(attrs, mcptrace.ToolName.String(target), mcptrace.OperationName.String(mcptrace.OperationExecuteTool))
		} else {
			attrs = append(attrs, mcptrace.PromptName.String(target))
		}
	case protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		if uri, ok := protocol.PlainStringMember(r.Params, "uri"); ok {
			attrs = append(attrs, mcptrace.ResourceURI.String(uri))
		}
	}
	return name, attrs
}

// answerRecorder is a ResponseWriter that notes how the request was
// answered, for its span.
//
// Concurrency: used by the goroutine serving the request; a handler that
// answers from another goroutine answers before ServeMCP returns (the
// span's outcome is read then).
type answerRecorder struct {
	mcpserver.ResponseWriter
	answered bool
	toolErr  bool            // a result whose isError is true
	err      *protocol.Error // the JSON-RPC error answered, if any
	frame    []byte          // a frame written whole, if any
}

func (a *answerRecorder) Reply(result any) {
	a.answered = true
	switch r := result.(type) {
	case *protocol.CallToolResult:
		a.toolErr = r != nil && r.IsError
	case protocol.CallToolResult:
		a.toolErr = r.IsError
	case protocol.ValidJSON:
		a.toolErr = isErrorResult(r)
	case json.RawMessage:
		a.toolErr = isErrorResult(r)
	}
	a.ResponseWriter.Reply(result)
}

func (a *answerRecorder) Error(e *protocol.Error) {
	a.answered, a.err = true, e
	a.ResponseWriter.Error(e)
}

func (a *answerRecorder) WriteFrame(frame []byte) {
	a.answered, a.frame = true, frame
	a.ResponseWriter.WriteFrame(frame)
}

func (a *answerRecorder) ReplyWith(write func(mcpserver.Wire) error) {
	a.answered = true
	a.ResponseWriter.ReplyWith(write)
}

// isErrorResult reports whether the encoded result says isError.
func isErrorResult(raw []byte) bool {
	v, found, _ := protocol.RawMember(raw, "isError")
	return found && string(v) == "true"
}

// record sets span's outcome: a JSON-RPC error's code is error.type, a
// tools/call result with isError set is a "tool_error", and a request
// the client cancelled (answered with nothing) is "cancelled".
func (a *answerRecorder) record(ctx context.Context, span trace.Span, method string) {
	if a.frame != nil {
		if e, found, _ := protocol.RawMember(a.frame, "error"); found {
			var pe protocol.Error
			if json.Unmarshal(e, &pe) == nil {
				a.err = &pe
			}
		} else if res, found, _ := protocol.RawMember(a.frame, "result"); found {
			a.toolErr = isErrorResult(res)
		}
	}
	switch {
	case a.err != nil:
		c := strconv.FormatInt(a.err.Code, 10)
		span.SetAttributes(mcptrace.ErrorType.String(c), mcptrace.ResponseStatusCode.String(c))
		span.SetStatus(codes.Error, a.err.Message)
	case !a.answered && ctx.Err() != nil:
		span.SetAttributes(mcptrace.ErrorType.String("cancelled"))
		span.SetStatus(codes.Error, "cancelled")
	case a.toolErr && method == protocol.MethodToolsCall:
		span.SetAttributes(mcptrace.ErrorType.String(mcptrace.ErrorTypeToolError))
		span.SetStatus(codes.Error, mcptrace.ErrorTypeToolError)
	}
}
