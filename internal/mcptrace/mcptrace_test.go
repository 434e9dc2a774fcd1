package mcptrace_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/internal/mcptrace"
)

// The trace context of a request's _meta becomes the context's remote
// span, with its tracestate and baggage; params without one leave the
// context as it was; Inject writes back what Extract read.
func TestExtractAndInject(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := mcptrace.Extract(context.Background(), json.RawMessage(`{"name":"x","_meta":{"traceparent":"`+tp+`","tracestate":"a=1","baggage":"user=alice","other":3}}`))
	sc := trace.SpanContextFromContext(ctx)
	assert.True(t, sc.IsValid() && sc.IsRemote(), "a remote span context: %v", sc)
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	assert.Equal(t, "a=1", sc.TraceState().String())
	assert.Equal(t, "alice", baggage.FromContext(ctx).Member("user").Value())
	assert.Equal(t, map[string]string{"traceparent": tp, "tracestate": "a=1", "baggage": "user=alice"}, mcptrace.Inject(ctx))

	for _, params := range []string{``, `null`, `{"name":"x"}`, `{"_meta":{}}`, `{"_meta":{"traceparent":7}}`, `{"_meta":{"traceparent":"garbage"}}`, `[1]`} {
		ctx := mcptrace.Extract(context.Background(), json.RawMessage(params))
		assert.False(t, trace.SpanContextFromContext(ctx).IsValid(), "no trace context in %s", params)
		assert.Empty(t, mcptrace.Inject(ctx), "nothing to inject from %s", params)
	}
}
