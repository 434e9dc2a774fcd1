package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// errTracingConfig reports OTEL_* variables that ask for something the
// command cannot do (an exporter or a protocol it does not have).
var errTracingConfig = errors.New("tracing configuration")

// tracing is the tracer provider the OTEL_* environment asks for.
type tracing struct {
	// provider exports the spans; nil when tracing is off.
	provider *sdktrace.TracerProvider
	// exporter and protocol say where they go, for the log.
	exporter, protocol string
}

// tracingFromEnv returns the tracing that the standard OpenTelemetry
// environment variables ask for. Tracing is off (a zero tracing) unless
// they ask for it: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with
// OTEL_TRACES_EXPORTER unset; OTEL_TRACES_EXPORTER=none and
// OTEL_SDK_DISABLED=true turn it off. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
// grpc, or http/protobuf (the default). The official exporters read the
// rest of their OTEL_EXPORTER_OTLP_* variables (endpoint, headers,
// timeout, TLS, compression), the SDK its OTEL_TRACES_SAMPLER and
// OTEL_BSP_* ones, and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name defaults to mcpvisor).
func tracingFromEnv(ctx context.Context, getenv func(string) string) (tracing, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return tracing{}, nil
	}
	exporter := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch exporter {
	case "none":
		return tracing{}, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return tracing{}, nil
		}
		exporter = "otlp"
	case "otlp":
	default:
		return tracing{}, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: mcpvisor exports traces over OTLP only (otlp or none)", errTracingConfig, exporter)
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return tracing{}, fmt.Errorf("%w: OTLP protocol %q: want grpc or http/protobuf", errTracingConfig, proto)
	}
	if err != nil {
		return tracing{}, fmt.Errorf("%w: the OTLP exporter: %w", errTracingConfig, err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", "mcpvisor"), attribute.String("service.version", version())),
		resource.Environment(), // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME win
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return tracing{}, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w", errTracingConfig, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tracing{provider: tp, exporter: exporter, protocol: proto}, nil
}

// shutdown flushes the spans not yet exported and stops the exporter,
// bounded by ctx. A zero tracing does nothing.
func (t tracing) shutdown(ctx context.Context) error {
	if t.provider == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// tracerProvider returns the provider for Options.TracerProvider: nil
// when tracing is off (never a typed nil in the interface).
func (t tracing) tracerProvider() trace.TracerProvider {
	if t.provider == nil {
		return nil
	}
	return t.provider
}

// tracingShutdownTimeout bounds the export of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// startTracing sets up the tracing the environment asks for (see
// tracingFromEnv) and logs it; an error is logged.
func (a *superviseCmd) startTracing(ctx context.Context) (tracing, error) {
	tr, err := tracingFromEnv(ctx, os.Getenv)
	if err != nil {
		a.log.Error().Err(err).Msg("cannot set up tracing")
		return tracing{}, err
	}
	if tr.provider != nil {
		a.log.Info().Str("exporter", tr.exporter).Str("protocol", tr.protocol).Msg("tracing on (OpenTelemetry)")
	}
	return tr, nil
}

// stopTracing exports the spans not yet sent, within
// tracingShutdownTimeout, and logs a failure.
func (a *superviseCmd) stopTracing(tr tracing) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := tr.shutdown(ctx); err != nil {
		a.log.Warn().Err(err).Msg("exporting the last spans")
	}
}
