package gateway

import (
	"context"
	"crypto/subtle"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// MCPPath is where the MCP endpoint is served.
const MCPPath = "/mcp"

// Handler returns the HTTP handler: the MCP endpoint at /mcp (POST, GET,
// DELETE), the admin API (GET /status, /metrics, /events) and the Parts
// (Options.Parts; the dashboard: /, /ui/, /admin/…, /login, /logout),
// all behind the security checks (see guard). A host mounts it where it
// likes (it routes on the full path); it is safe for concurrent use, and
// serves until Close.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mountToolModes(mux, limitStatus(g.view.sessionBound(g.srv.HTTPHandler()))) // MCPPath, and the per-mode paths (search.go)
	mux.HandleFunc("GET /status", g.admin.serveStatus)
	mux.HandleFunc("GET /metrics", g.admin.serveMetrics)
	mux.HandleFunc("GET /events", g.admin.serveEvents)
	for _, p := range g.opts.Parts {
		p.Mount(mux, g.site)
	}
	if rs := g.front.rs; rs != nil {
		if ua, ok := g.b.(UserAuthorizer); ok {
			(&userAuth{backend: ua, audit: g.opts.Audit}).mount(mux) // userauth.go
		}
		mux.HandleFunc("GET "+ProtectedResourcePath, rs.serveMetadata)
		mux.HandleFunc("GET "+ProtectedResourcePath+"/", rs.serveMetadata)
	}
	return g.trail.auditHTTP(g.front.guard, mux)
}

// guard enforces the HTTP security rules before any handler:
//   - DNS rebinding: when Options.LocalOnly is set (the listener is on
//     loopback), the Host header must name a loopback host; and an Origin
//     header, when present, must be a loopback origin or one of
//     Options.AllowedOrigins. Either failure is 403.
//   - Options.Token: every request must carry "Authorization: Bearer
//     <token>" (401 with WWW-Authenticate otherwise); a Part's login
//     (the dashboard's cookie) stands for it outside /mcp, and what a Part
//     calls public (the dashboard's page and token form) needs neither
//     (see admitted).
//   - Options.ResourceServer: an access token (see authenticate), whose
//     caller's Identity the handlers find in the request's context; the
//     protected resource metadata needs none.
func (f *front) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.opts.LocalOnly && !loopbackHost(r.Host) {
			f.metrics.rejected.Add(1)
			httpError(w, http.StatusForbidden, "forbidden: Host "+strconv.Quote(r.Host)+" is not a loopback host")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !f.originAllowed(o) {
			f.metrics.rejected.Add(1)
			httpError(w, http.StatusForbidden, "forbidden: Origin "+strconv.Quote(o)+" is not allowed")
			return
		}
		if f.rs != nil {
			if !isMetadataPath(r.URL.Path) && !isUserAuthPath(r.URL.Path) {
				if r = f.authenticate(w, r); r == nil {
					return
				}
			}
		} else if f.opts.Token != "" {
			if !f.admitted(r) { // the bearer token, or a Part's login
				f.metrics.rejected.Add(1)
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcpvisor"`)
				httpError(w, http.StatusUnauthorized, "unauthorized: a bearer token is required")
				return
			}
			if f.bearerOK(r) || !isMCPPath(r.URL.Path) && f.partLogin(r) {
				r = r.WithContext(staticIdentity(r.Context()))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (f *front) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if loopbackHost(u.Host) {
		return true
	}
	for _, o := range f.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// Serve serves the handler on l until ctx ends, then shuts the server
// down (streams are ended by Close/Drain first).
func (g *Gateway) Serve(ctx context.Context, l net.Listener) error {
	// The headers must arrive within ReadHeaderTimeout; a POST's body
	// within Options.BodyTimeout (set per request while it is read: a
	// ReadTimeout would cut the long streams); an idle keep-alive
	// connection is closed after IdleTimeout.
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: nil}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// bodyDeadline makes the read of r's body (which follows) fail once
// Options.BodyTimeout has passed, so that a body that never arrives holds
// nothing; the returned func, called once it was read (not after a
// failed read: then the connection is to close), clears the deadline.
func (f *front) bodyDeadline(w http.ResponseWriter) (clear func()) {
	if d := f.opts.BodyTimeout; d > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			return func() { _ = rc.SetReadDeadline(time.Time{}) }
		}
	}
	return func() {}
}

// bearerOK reports whether r carries the gateway's token as a bearer
// token.
func (f *front) bearerOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(f.opts.Token)) == 1
}

// admitted decides the token check of guard (Options.Token set): the
// request carries the bearer token; or, outside MCPPath, a Part's login
// or a request a Part calls public.
func (f *front) admitted(r *http.Request) bool {
	if f.bearerOK(r) {
		return true
	}
	if isMCPPath(r.URL.Path) {
		return false
	}
	return f.partAdmits(r)
}

// partAdmits reports whether a Part's login or public page admits r
// without a token.
func (f *front) partAdmits(r *http.Request) bool {
	for _, p := range f.opts.Parts {
		if p.Authenticated(r) || p.Public(r) {
			return true
		}
	}
	return false
}

// partLogin reports whether r carries a Part's login (had in exchange for
// Options.Token, which it stands for).
func (f *front) partLogin(r *http.Request) bool {
	for _, p := range f.opts.Parts {
		if p.Authenticated(r) {
			return true
		}
	}
	return false
}

// flush sends what w holds.
func flush(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
}

// front is the HTTP listener's security checks (guard) and bounds.
//
// Concurrency: safe for concurrent use; opts is fixed at New, metrics
// are atomic counters.
type front struct {
	opts    Options
	metrics *metrics
	rs      *protectedResource // nil without Options.ResourceServer
	log     zerolog.Logger
}
