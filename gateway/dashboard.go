package gateway

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"time"
)

// The dashboard's page, script and style sheet: plain HTML, JavaScript
// and CSS, served as they are (no build step, nothing from the network).
//
//go:embed dashboard
var dashboardFiles embed.FS

// dashboardCSP is the Content-Security-Policy of every dashboard page:
// scripts, styles and connections from this origin only, no inline
// script or style, no framing, forms posted only here.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// DashboardOptions configure the dashboard the admin listener serves at
// / (see docs/dashboard.md). The zero value serves a read-only view of
// the Backend plus the actions the Backend implements (Controller,
// PermissionAnswerer, LoginStarter); Reload, when set, adds the reload
// button.
type DashboardOptions struct {
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

// Controller is implemented by a Backend whose servers the dashboard may
// reconnect and toggle (*mcpvisor.Supervisor does).
type Controller interface {
	Reconnect(ctx context.Context, name string) error
	ReconnectAll(ctx context.Context) error
	Toggle(ctx context.Context, name string, on bool) error
}

// dashboard holds the dashboard's state: its feed of status samples and
// its login sessions.
//
// Concurrency: safe for concurrent use; the feed and the cookie sessions
// have their own locks.
type dashboard struct {
	g      *Gateway
	opts   DashboardOptions
	feed   *dashFeed
	logins *cookieSessions
}

func newDashboard(g *Gateway, o DashboardOptions) *dashboard {
	if o.SampleInterval <= 0 {
		o.SampleInterval = time.Second
	}
	if o.History <= 0 {
		o.History = 120
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := &dashboard{g: g, opts: o, logins: newCookieSessions(o.Now)}
	d.feed = newDashFeed(g, o)
	return d
}

// routes registers the dashboard's pages and its admin endpoints.
func (d *dashboard) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(dashboardFiles, "dashboard")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /{$}", d.serveIndex)
	mux.Handle("GET /ui/", withCSP(http.StripPrefix("/ui/", files)))
	mux.HandleFunc("POST /login", d.serveLogin)
	mux.HandleFunc("POST /logout", d.mutating(d.serveLogout))
	mux.HandleFunc("GET /admin/stream", d.serveStream)
	mux.HandleFunc("GET /admin/pool", d.servePool)
	mux.HandleFunc("GET /admin/channels", d.serveChannels)
	mux.HandleFunc("POST /admin/reconnect", d.mutating(d.serveReconnectAll))
	mux.HandleFunc("POST /admin/servers/{name}/reconnect", d.mutating(d.serveReconnect))
	mux.HandleFunc("POST /admin/servers/{name}/toggle", d.mutating(d.serveToggle))
	mux.HandleFunc("POST /admin/servers/{name}/login", d.mutating(d.serveLoginServer))
	mux.HandleFunc("POST /admin/reload", d.mutating(d.serveReload))
	mux.HandleFunc("POST /admin/permissions/{id}", d.mutating(d.serveAnswer))
}

// serveIndex serves the dashboard, or the token form when the gateway
// has a token and the request carries neither it nor a login cookie.
func (d *dashboard) serveIndex(w http.ResponseWriter, r *http.Request) {
	page := "index.html"
	if d.g.opts.Token != "" && !d.g.authenticated(r) {
		page = "login.html"
	}
	b, err := dashboardFiles.ReadFile("dashboard/" + page)
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
