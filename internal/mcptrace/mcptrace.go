// Package mcptrace holds what mcpvisor's client spans (session) and
// server spans (the gateway) share: the attribute keys of the
// OpenTelemetry semantic conventions for MCP, and the trace context
// carried in a request's params._meta (W3C Trace Context and Baggage,
// SEP-414).
package mcptrace

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Attribute keys of the semantic conventions for MCP (and the general
// ones its spans use).
const (
	MethodName         = attribute.Key("mcp.method.name")
	SessionID          = attribute.Key("mcp.session.id")
	ProtocolVersion    = attribute.Key("mcp.protocol.version")
	ResourceURI        = attribute.Key("mcp.resource.uri")
	ToolName           = attribute.Key("gen_ai.tool.name")
	PromptName         = attribute.Key("gen_ai.prompt.name")
	OperationName      = attribute.Key("gen_ai.operation.name")
	RequestID          = attribute.Key("jsonrpc.request.id")
	ResponseStatusCode = attribute.Key("rpc.response.status_code")
	ErrorType          = attribute.Key("error.type")
	NetworkTransport   = attribute.Key("network.transport")
)

// Values of the semantic conventions.
const (
	// ErrorTypeToolError is error.type of a tools/call answered with a
	// result whose isError is true.
	ErrorTypeToolError = "tool_error"
	// OperationExecuteTool is gen_ai.operation.name of a tools/call.
	OperationExecuteTool = "execute_tool"
)

// Propagator reads and writes the trace context of a request's _meta: W3C
// Trace Context and W3C Baggage, the keys SEP-414 names.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Extract returns ctx with the trace context (and baggage) that params
// (a request's params, as received) carry in their _meta; ctx itself
// when they carry none.
func Extract(ctx context.Context, params json.RawMessage) context.Context {
	meta, found, ok := protocol.RawMember(params, "_meta")
	if !found || !ok {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	for _, k := range protocol.TraceMetaKeys {
		v, found, _ := protocol.RawMember(meta, k)
		if !found {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil && s != "" {
			carrier[k] = s
		}
	}
	if len(carrier) == 0 {
		return ctx
	}
	return Propagator.Extract(ctx, carrier)
}

// Inject returns the trace context of ctx as the _meta members SEP-414
// names (empty when ctx has none).
func Inject(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	return carrier
}
