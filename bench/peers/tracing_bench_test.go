package peers

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// BenchmarkCallTraced is BenchmarkCallSequential and
// BenchmarkCallConcurrent32 for mcpvisor with tracing on: every call
// under a parent span (an agent's turn), recorded by the SDK (always
// sampled, batched to an exporter that discards). Compare its cpu-us/call
// and allocs/op with client=mcpvisor of those benchmarks (tracing off).
func BenchmarkCallTraced(b *testing.B) {
	for _, era := range harness.Eras {
		for _, workers := range []int{1, inFlight} {
			name := "era=" + era + "/sequential"
			if workers > 1 {
				name = "era=" + era + "/concurrent32"
			}
			b.Run(name, func(b *testing.B) {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				benchCalls(b, era, workers, func(ctx context.Context) (harness.Session, error) {
					s, err := harness.ConnectMcpvisorWith(ctx, harness.Command{Path: mockBin}, era, mcpvisor.Options{TracerProvider: tp})
					if err != nil {
						return nil, err
					}
					return tracedSession{s, tp.Tracer("bench")}, nil
				})
			})
		}
	}
}

// tracedSession makes each call under a span of its own, as a traced host
// does.
type tracedSession struct {
	harness.Session
	tracer trace.Tracer
}

func (s tracedSession) Echo(ctx context.Context) (string, error) {
	ctx, span := s.tracer.Start(ctx, "agent turn")
	defer span.End()
	return s.Session.Echo(ctx)
}
