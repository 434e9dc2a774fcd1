package mcpvisor

import (
	"context"
	"net"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor/internal/mcptrace"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/transports"
)

// instrumentationName names mcpvisor's tracer (the instrumentation scope
// of its spans).
const instrumentationName = "github.com/mcpvisor/mcpvisor"

// mcpvisor's own span attributes (the others are the semantic
// conventions', see session.Tracing).
const (
	// AttrServerName is the configured name of the server a span talks to.
	attrServerName = attribute.Key("mcpvisor.server.name")
	// AttrConnectAttempt is a connect span's attempt number in its
	// reconnect episode: 0 for a first connect.
	attrConnectAttempt = attribute.Key("mcpvisor.connect.attempt")
	// AttrReconnect says whether a connect span replaces a connection
	// (the server had one, or had lost it).
	attrReconnect = attribute.Key("mcpvisor.reconnect")
	// AttrTransport is the transport kind of the server's config
	// (stdio, http, sse, ws, sdk).
	attrTransport = attribute.Key("mcpvisor.transport")
)

// Spans named by the supervisor itself.
const (
	spanConnect   = "mcpvisor.connect"
	spanReconnect = "mcpvisor.reconnect"
)

// newTracer returns mcpvisor's tracer of tp, or nil for none.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(instrumentationName)
}

// serverAttributes are the attributes of every span about server name
// reached through cfg: its name, transport and network peer.
func serverAttributes(name string, cfg ServerConfig) []attribute.KeyValue {
	kind := cfg.Kind()
	attrs := []attribute.KeyValue{attrServerName.String(name), attrTransport.String(string(kind))}
	k, _ := transports.Lookup(kind)
	if k.NetworkTransport != "" {
		attrs = append(attrs, mcptrace.NetworkTransport.String(k.NetworkTransport))
	}
	if k.Remote {
		if u, err := url.Parse(cfg.URL); err == nil && u.Hostname() != "" {
			attrs = append(attrs, attribute.String("server.address", u.Hostname()))
			if port, err := strconv.Atoi(portOf(u)); err == nil {
				attrs = append(attrs, attribute.Int("server.port", port))
			}
		}
	}
	return attrs
}

// portOf returns u's port, or its scheme's default one.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if p := transports.DefaultPort(u.Scheme); p != "" {
		return p
	}
	_, p, _ := net.SplitHostPort(u.Host)
	return p
}

// sessionTracing is the tracing of the sessions of server name: its
// client spans carry the server's attributes and mcpvisor's failure class
// as error.type.
func sessionTracing(tracer trace.Tracer, name string, cfg ServerConfig) session.Tracing {
	if tracer == nil {
		return session.Tracing{}
	}
	return session.Tracing{
		Tracer:     tracer,
		Attributes: serverAttributes(name, cfg),
		ErrorType:  func(err error) string { return string(ClassifyFailure(err)) },
	}
}

// startConnectSpan starts the span of one connect attempt of server name,
// or returns ctx and nil when tracer is nil.
func startConnectSpan(ctx context.Context, tracer trace.Tracer, name string, cfg ServerConfig, attempt int, reconnect bool) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	spanName := spanConnect
	if reconnect {
		spanName = spanReconnect
	}
	attrs := append(serverAttributes(name, cfg), attrConnectAttempt.Int(attempt), attrReconnect.Bool(reconnect))
	return tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endConnectSpan ends span (when not nil) with the outcome of its
// connect: the negotiated version and session, or the failure's class as
// error.type.
func endConnectSpan(span trace.Span, res connectResult) {
	if span == nil {
		return
	}
	defer span.End()
	if res.err != nil {
		class := string(ClassifyFailure(res.err))
		span.SetAttributes(mcptrace.ErrorType.String(class))
		span.SetStatus(codes.Error, class)
		return
	}
	span.SetAttributes(mcptrace.ProtocolVersion.String(res.sess.Peer().Version), attribute.Int("mcpvisor.tools", len(res.lists.tools)))
	if sc, ok := res.sess.Conn().(interface{ SessionID() string }); ok && sc.SessionID() != "" {
		span.SetAttributes(mcptrace.SessionID.String(sc.SessionID()))
	}
}
