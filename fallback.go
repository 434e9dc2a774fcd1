package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/transports"
)

// A server configured with a url and no type may speak Streamable HTTP
// or the legacy HTTP+SSE transport of 2024-11-05. The specification's
// backwards-compatibility section (2026-07-28, basic/transports/
// streamable-http, "HTTP+SSE Transport") tells a client to POST first
// and, when the POST is refused with 400, 404 or 405 whose body is not a
// recognised JSON-RPC error, to GET the URL and expect the endpoint
// event. The connect does that: Streamable HTTP first; a POST refused
// with a 4xx other than 401/403 (authorization, handled by OAuth), 408
// and 429 (transient) falls back to HTTP+SSE. (A body with a JSON-RPC
// error for the request reaches the session as an answer, never as such
// a refusal, so a refusal here carries none.) The choice is remembered
// on the server's handle for its reconnects (sseOnly), shown by
// ServerStatus.Transport, and forgotten when the server's config changes
// or when the remembered transport is refused in turn (a server that
// moved to Streamable HTTP).

// autoTransport reports whether cfg leaves the remote transport to be
// found out: a url with no type.
func autoTransport(cfg ServerConfig) bool {
	return cfg.Type == "" && cfg.Command == "" && cfg.URL != ""
}

// refusedByStatus reports whether err is an HTTP request with method
// refused the way a server that does not speak the attempted transport
// refuses it.
func refusedByStatus(err error, method string) bool {
	var status *transports.HTTPStatusError
	if !errors.As(err, &status) || status.Method != method {
		return false
	}
	switch status.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return status.StatusCode >= 400 && status.StatusCode < 500
}

// connectAuto connects a url-only server: over the transport remembered
// in sseOnly, else Streamable HTTP, falling back to HTTP+SSE when the
// POST is refused. The result says which transport it used.
func connectAuto(ctx context.Context, cfg ServerConfig, sopts session.Options, dc dialConfig, sseOnly *atomic.Bool) connectResult {
	streamableCfg, sseCfg := cfg, cfg
	streamableCfg.Type, sseCfg.Type = transports.TypeHTTP, transports.TypeSSE
	if sseOnly.Load() {
		res := connectOnce(ctx, sseCfg, sopts, dc)
		if res.err == nil || !refusedByStatus(res.err, http.MethodGet) {
			return res
		}
		// The server no longer offers the legacy stream: find out again.
		sseOnly.Store(false)
	}
	res := connectOnce(ctx, streamableCfg, sopts, dc)
	if res.err == nil || !refusedByStatus(res.err, http.MethodPost) || ctx.Err() != nil {
		return res
	}
	legacy := connectOnce(ctx, sseCfg, sopts, dc)
	if legacy.err != nil {
		legacy.err = fmt.Errorf("%w (tried after Streamable HTTP was refused: %v)", legacy.err, res.err)
		return legacy
	}
	sseOnly.Store(true)
	dc.opts.Logger.Info().Err(res.err).Msg("Streamable HTTP refused: the server speaks HTTP+SSE, which its reconnects will use")
	return legacy
}

// effectiveTransport is the transport a server's connections use: its
// config's, or for a url-only server the one found (see connectAuto).
func effectiveTransport(cfg ServerConfig, sseOnly bool) transports.Type {
	if autoTransport(cfg) && sseOnly {
		return transports.TypeSSE
	}
	return cfg.Kind()
}
