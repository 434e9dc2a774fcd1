package gateway

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/mcpvisor/mcpvisor"
)

// Part is an optional part of a gateway's HTTP listener, served beside
// the MCP endpoint and the admin API (Options.Parts). The dashboard
// (package gateway/dashboard) is one; a host that gives none links none.
//
// A Part serves one gateway. Its methods are called concurrently, from
// the goroutines serving HTTP requests (Mount from Handler's caller).
type Part interface {
	// Mount registers the part's handlers on mux, on paths other than
	// the gateway's own (MCPPath, /status, /metrics, /events); site is
	// the part's way to the gateway. Handler calls it each time it
	// builds a handler, always with the same site. Every request reaches
	// the handlers past the gateway's checks (Host, Origin and the token,
	// see Handler).
	Mount(mux *http.ServeMux, site *Site)
	// Authenticated reports whether r carries a credential the part
	// issued in exchange for Options.Token (a login cookie): then r
	// passes the token check outside MCPPath, which always wants the
	// bearer token itself.
	Authenticated(r *http.Request) bool
	// Public reports whether r asks for what anybody may have without the
	// token (a login page and what it loads).
	Public(r *http.Request) bool
}

// Site is what a Part may see and do of its gateway.
//
// Concurrency: safe for concurrent use; it reads the gateway's state
// under the gateway's own locks.
type Site struct{ g *Gateway }

// Backend returns the gateway's Backend, for the optional interfaces a
// part uses (Controller-like ones of its own, ChannelSource).
func (s *Site) Backend() Backend { return s.g.b }

// Status returns what GET /status serves (Gateway.Status).
func (s *Site) Status() StatusReport { return s.g.Status() }

// Summary returns the gateway-wide part of Status (version, start,
// sessions, requests in flight, tools offered) without asking the
// Backend for its servers' status.
func (s *Site) Summary() StatusReport {
	g := s.g
	rep := StatusReport{Version: g.opts.Version, Started: g.started, InFlight: g.requests.inflight.Load(), Sessions: g.srv.Stats().Sessions}
	for _, t := range g.b.Tools() {
		if g.gate.offered(t.Name) {
			rep.Tools++
		}
	}
	return rep
}

// ToolName returns the name under which downstream clients call pool
// tool t.
func (s *Site) ToolName(t mcpvisor.Tool) string { return s.g.naming.toolName(t) }

// Offered reports whether Options.Allow and Deny let the tool named
// qualified (a pool or host name) be offered downstream.
func (s *Site) Offered(qualified string) bool { return s.g.gate.offered(qualified) }

// ChannelWaits returns the number of wait_for_channel_message calls
// waiting now.
func (s *Site) ChannelWaits() int {
	return s.g.chans.count()
}

// Done returns a channel closed when the gateway closes: a part's
// streams and background work end then.
func (s *Site) Done() <-chan struct{} { return s.g.closed }

// TokenRequired reports whether the gateway has a token (Options.Token).
func (s *Site) TokenRequired() bool { return s.g.opts.Token != "" }

// TokenMatches reports, in constant time, whether token is the
// gateway's (false when it has none).
func (s *Site) TokenMatches(token string) bool {
	return s.g.opts.Token != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.g.opts.Token)) == 1
}

// SameOrigin checks a state-changing request against cross-site request
// forgery: a browser's request must come from this very origin (Origin
// http://<Host>, or one of Options.AllowedOrigins), not merely from
// another loopback port, and not from another site (Sec-Fetch-Site). A
// request without Origin (not a browser's: curl, a script) passes.
func (s *Site) SameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if strings.EqualFold(o, "http://"+r.Host) || strings.EqualFold(o, "https://"+r.Host) {
		return true
	}
	for _, a := range s.g.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), o) {
			return true
		}
	}
	return false
}

// Rejected counts a request the part refused for security (a wrong
// token, a cross-origin request) in the gateway's metrics, beside those
// the gateway's own checks refused.
func (s *Site) Rejected() { s.g.metrics.rejected.Add(1) }

// BodyDeadline makes the read of r's body (which follows) fail once
// Options.BodyTimeout has passed; the returned func, called once it was
// read (not after a failed read: the connection is to close), clears the
// deadline.
func (s *Site) BodyDeadline(w http.ResponseWriter) (clear func()) { return s.g.front.bodyDeadline(w) }
