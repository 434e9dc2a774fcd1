// Package dashboard is the gateway's web dashboard (docs/dashboard.md):
// a live view of the pool's servers, their calls and events, the
// channel messages and permission requests, and actions on them
// (reconnect, toggle, log in, reload, answer). It is a gateway.Part: a
// host adds it with gateway.Options{Parts: []gateway.Part{dashboard.New(o)}},
// and a host that does not links none of it.
//
// Its page, script and style sheet are plain files embedded in the
// binary (static/), served with a strict Content-Security-Policy; the
// page talks to the gateway over one event stream (GET /admin/stream)
// and JSON actions (POST /admin/…), which the gateway's checks guard
// (Host, Origin, token or login cookie) and which take only same-origin
// JSON bodies.
package dashboard

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/gateway"
)

// The dashboard's page, script and style sheet: plain HTML, JavaScript
// and CSS, served as they are (no build step, nothing from the network).
//
//go:embed static
var dashboardFiles embed.FS

// dashboardCSP is the Content-Security-Policy of every dashboard page:
// scripts, styles and connections from this origin only, no inline
// script or style, no framing, forms posted only here.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options configure the dashboard (see docs/dashboard.md). The zero
// value serves a read-only view of the gateway's Backend plus the
// actions the Backend implements (Controller, gateway.ChannelSource,
// gateway.ServerSource); Reload, when set, adds the reload button.
type Options struct {
	// Reload re-reads the configuration and applies it, as SIGHUP does
	// (POST /admin/reload). Nil: the dashboard has no reload action.
	Reload func(ctx context.Context) error
	// Logins hands the authorization URL of a login the dashboard started
	// back to the page (see LoginRelay). Nil: a login opens the browser
	// the supervisor's OAuthOptions.OpenURL opens, as `mcpvisor auth`
	// does.
	Logins *LoginRelay
	// SampleInterval is how often the servers' status is sampled for the
	// live rows and the calls/s charts (default 1 s).
	SampleInterval time.Duration
	// History is how many samples each server's chart keeps (default
	// 120: two minutes at the default interval).
	History int
	// Now tells the time (default time.Now).
	Now func() time.Time
}

// Controller is implemented by a gateway.Backend whose servers the
// dashboard may reconnect and toggle (*mcpvisor.Supervisor does): all of
// them at once, and each through its gateway.ServerSource handle.
type Controller interface {
	gateway.ServerSource
	ReconnectAll(ctx context.Context) error
}

// Dashboard is the gateway's web dashboard: a gateway.Part to give a
// gateway in Options.Parts. It holds its feed of status samples and its
// login sessions, and serves one gateway (the first that mounts it).
//
// Concurrency: safe for concurrent use. site is set once, by the first
// Mount (once); the feed and the cookie sessions have their own locks;
// the feed's one sampling goroutine starts with the first stream and
// ends when the gateway closes.
type Dashboard struct {
	opts   Options
	logins *cookieSessions
	once   sync.Once
	site   *gateway.Site // set by the first Mount
	feed   *dashFeed     // made by the first Mount
}

var _ gateway.Part = (*Dashboard)(nil)

// New returns a dashboard with options o (the zero value is fine).
func New(o Options) *Dashboard {
	if o.SampleInterval <= 0 {
		o.SampleInterval = time.Second
	}
	if o.History <= 0 {
		o.History = 120
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Dashboard{opts: o, logins: newCookieSessions(o.Now)}
}

// Mount registers the dashboard's pages and its admin endpoints (a
// gateway.Part): /, /ui/, /login, /logout and /admin/…. The first site
// mounted is the one it serves.
func (d *Dashboard) Mount(mux *http.ServeMux, site *gateway.Site) {
	d.once.Do(func() {
		d.site = site
		d.feed = newDashFeed(site, d.opts)
	})
	d.routes(mux)
}

// Authenticated reports whether r carries a live login cookie, which the
// token form hands out in exchange for the gateway's token (a
// gateway.Part; the gateway counts it outside its MCP endpoint only).
func (d *Dashboard) Authenticated(r *http.Request) bool {
	c, err := r.Cookie(loginCookie)
	return err == nil && d.logins.valid(c.Value)
}

// Public reports whether r asks for what anybody may see (a
// gateway.Part): the dashboard's page, which shows the token form to a
// stranger, its script and style sheet, and the form's POST.
func (d *Dashboard) Public(r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet && (r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/")):
		return true
	case r.Method == http.MethodPost && r.URL.Path == "/login":
		return true
	}
	return false
}

// routes registers the dashboard's pages and its admin endpoints.
func (d *Dashboard) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(dashboardFiles, "static")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /{$}", d.serveIndex)
	mux.Handle("GET /ui/", withCSP(http.StripPrefix("/ui/", files)))
	mux.HandleFunc("POST /login", d.serveLogin)
	mux.HandleFunc("POST /logout", d.mutating(d.serveLogout))
	mux.HandleFunc("GET /admin/stream", d.serveStream)
	mux.HandleFunc("GET /admin/pool", d.servePool)
	mux.HandleFunc("GET /admin/channels", d.serveChannels)
	mux.HandleFunc("POST /admin/reconnect", d.mutating(d.adminOnly(d.serveReconnectAll)))
	mux.HandleFunc("POST /admin/servers/{name}/reconnect", d.mutating(d.adminOnly(d.serveReconnect)))
	mux.HandleFunc("POST /admin/servers/{name}/toggle", d.mutating(d.adminOnly(d.serveToggle)))
	mux.HandleFunc("POST /admin/servers/{name}/login", d.mutating(d.adminOnly(d.serveLoginServer)))
	mux.HandleFunc("POST /admin/reload", d.mutating(d.adminOnly(d.serveReload)))
	mux.HandleFunc("POST /admin/permissions/{id}", d.mutating(d.adminOnly(d.serveAnswer)))
}

// serveIndex serves the dashboard, or the token form when the gateway
// has a token and the request carries neither it nor a login cookie.
func (d *Dashboard) serveIndex(w http.ResponseWriter, r *http.Request) {
	page := "index.html"
	if d.site.TokenRequired() && !d.site.TokenMatches(bearer(r)) && !d.Authenticated(r) {
		page = "login.html"
	}
	b, err := dashboardFiles.ReadFile("static/" + page)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make the form's Origin "null"
	_, _ = w.Write(b)
}

func withCSP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
