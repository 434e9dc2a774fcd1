package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/internal/mcptrace"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Tracing configures the OpenTelemetry client spans of a session,
// following the semantic conventions for MCP: one span of kind client per
// request sent (named "{method}" or "{method} {tool or prompt}"), whose
// context goes to the server in the request's params._meta as W3C Trace
// Context and Baggage (traceparent, tracestate, baggage: SEP-414). The
// span's parent is the span of the request's context, if any. Neither
// arguments nor results are recorded.
//
// The zero value traces nothing, and then a request costs one nil check
// more than without tracing.
type Tracing struct {
	// Tracer makes the spans. Nil records none and puts no trace keys
	// in _meta.
	Tracer trace.Tracer
	// Attributes are added to every span (the server's name, the
	// transport's network attributes).
	Attributes []attribute.KeyValue
	// ErrorType names the class of a failed request for the error.type
	// attribute when the server did not answer with a JSON-RPC error
	// (whose code is the class) and the request did not time out
	// ("timeout"). Nil, or an empty name, means "_OTHER".
	ErrorType func(error) string
}

// spans makes the client spans of a session's requests. It is
// immutable after Open: used concurrently by every caller's goroutine.
type spans struct {
	cfg  Tracing
	peer *Peer           // the session's, written by the negotiation
	conn transports.Conn // for the session id, set by Open
}

// send is core.send under a client span, with the span's context in the
// request's _meta.
func (t *spans) send(ctx context.Context, c *core, id int64, method string, params any, answerWithin time.Duration) (json.RawMessage, error) {
	name, attrs := t.start(id, method, params)
	ctx, span := t.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	params, err := withTraceContext(ctx, params)
	if err != nil {
		err = fmt.Errorf("%s: %w", method, err)
		t.failed(span, err)
		return nil, err
	}
	raw, err := c.send(ctx, id, method, params, answerWithin)
	if err != nil {
		t.failed(span, err)
		return nil, err
	}
	if method == protocol.MethodToolsCall {
		if v, found, _ := protocol.RawMember(raw, "isError"); found && string(v) == "true" {
			span.SetAttributes(mcptrace.ErrorType.String(mcptrace.ErrorTypeToolError))
			span.SetStatus(codes.Error, mcptrace.ErrorTypeToolError)
		}
	}
	return raw, nil
}

// start returns the name and the attributes of the span of request id.
func (t *spans) start(id int64, method string, params any) (string, []attribute.KeyValue) {
	attrs := make([]attribute.KeyValue, 0, 8+len(t.cfg.Attributes))
	attrs = append(attrs, mcptrace.MethodName.String(method), mcptrace.RequestID.String(strconv.FormatInt(id, 10)))
	if v := t.peer.Version; v != "" {
		attrs = append(attrs, mcptrace.ProtocolVersion.String(v))
	}
	if sc, ok := t.conn.(interface{ SessionID() string }); ok {
		if sid := sc.SessionID(); sid != "" {
			attrs = append(attrs, mcptrace.SessionID.String(sid))
		}
	}
	attrs = append(attrs, t.cfg.Attributes...)
	name := method
	switch method {
	case protocol.MethodToolsCall:
		if tool := toolNameOf(params); tool != "" {
			name += " " + tool
			attrs = append(attrs, mcptrace.ToolName.String(tool))
		}
		attrs = append(attrs, mcptrace.OperationName.String(mcptrace.OperationExecuteTool))
	case protocol.MethodPromptsGet:
		if p, ok := params.(protocol.GetPromptParams); ok && p.Name != "" {
			name += " " + p.Name
			attrs = append(attrs, mcptrace.PromptName.String(p.Name))
		}
	case protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		if uri := uriOf(params); uri != "" {
			attrs = append(attrs, mcptrace.ResourceURI.String(uri))
		}
	}
	return name, attrs
}

// uriOf returns the uri member of resource request params.
func uriOf(params any) string {
	switch p := params.(type) {
	case protocol.ReadResourceParams:
		return p.URI
	case protocol.SubscribeParams:
		return p.URI
	}
	return ""
}

// failed records on span why its request failed: error.type is the
// server's JSON-RPC error code (and rpc.response.status_code too),
// "timeout", or the class Tracing.ErrorType gives. The status says the
// code's message, or the class: never the whole error, which may quote
// what the server or the caller sent.
func (t *spans) failed(span trace.Span, err error) {
	var rpcErr *protocol.Error
	var timeout *TimeoutError
	switch {
	case errors.As(err, &rpcErr):
		code := strconv.FormatInt(rpcErr.Code, 10)
		span.SetAttributes(mcptrace.ErrorType.String(code), mcptrace.ResponseStatusCode.String(code))
		span.SetStatus(codes.Error, rpcErr.Message)
		return
	case errors.As(err, &timeout):
		span.SetAttributes(mcptrace.ErrorType.String("timeout"))
		span.SetStatus(codes.Error, "timeout")
		return
	}
	class := ""
	if f := t.cfg.ErrorType; f != nil {
		class = f(err)
	}
	if class == "" {
		class = "_OTHER"
	}
	span.SetAttributes(mcptrace.ErrorType.String(class))
	span.SetStatus(codes.Error, class)
}

// withTraceContext returns params with the trace context of ctx in its
// _meta (replacing any trace keys the caller put there).
func withTraceContext(ctx context.Context, params any) (any, error) {
	carrier := mcptrace.Inject(ctx)
	var raw []byte
	switch p := params.(type) {
	case nil:
	case protocol.ValidJSON:
		raw = p
	case json.RawMessage:
		raw = p
	default:
		enc, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("encoding params: %w", err)
		}
		raw = enc
	}
	if len(carrier) == 0 && !hasTraceKey(raw) {
		return params, nil
	}
	return protocol.SetTraceMeta(raw, carrier)
}

// hasTraceKey reports whether params may hold a trace key in its _meta
// (a cheap test: the key's quoted name appears anywhere).
func hasTraceKey(params []byte) bool {
	for _, k := range protocol.TraceMetaKeys {
		if containsQuoted(params, k) {
			return true
		}
	}
	return false
}

func containsQuoted(b []byte, k string) bool {
	n := len(k) + 2
	for i := 0; i+n <= len(b); i++ {
		if b[i] == '"' && b[i+n-1] == '"' && string(b[i+1:i+n-1]) == k {
			return true
		}
	}
	return false
}
