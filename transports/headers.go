package transports

import "context"

// Header is one HTTP header field of a single request.
type Header struct {
	Name, Value string
}

// requestHeadersKey is the context key of WithRequestHeaders.
type requestHeadersKey struct{}

// WithRequestHeaders returns a context whose Send carries hs as extra
// HTTP headers of the request it makes, on the transports that make one
// HTTP request per message (see HeaderCarrier). The session layer uses it
// for the Mcp-Param-* headers of a tools/call (SEP-2243). Transports that
// do not send each message as its own request ignore it. hs must not be
// modified afterwards.
func WithRequestHeaders(ctx context.Context, hs []Header) context.Context {
	if len(hs) == 0 {
		return ctx
	}
	return context.WithValue(ctx, requestHeadersKey{}, hs)
}

// RequestHeaders returns the headers set by WithRequestHeaders, if any.
func RequestHeaders(ctx context.Context) []Header {
	hs, _ := ctx.Value(requestHeadersKey{}).([]Header)
	return hs
}

// HeaderCarrier is implemented by a Conn that can carry request headers
// (WithRequestHeaders) with what it sends.
type HeaderCarrier interface {
	// CarriesRequestHeaders reports whether the headers are sent now:
	// Streamable HTTP once the session speaks the stateless era
	// (2026-07-28), whose POSTs mirror tool parameters into headers.
	CarriesRequestHeaders() bool
}
