package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Per-user upstream authorization. Behind a ResourceServer every caller
// is a principal (mcpvisor.WithPrincipal: the issuer and subject of its
// token), and a server whose credentials are per user is reached through
// the caller's own session. A caller that has not authorized such a
// server gets the JSON-RPC error CodeURLElicitationRequired (MCP
// 2025-11-25's URL elicitation) whose URL is the gateway's confirmation
// page, UserAuthorizePath?flow=…: it names the server and the caller the
// authorization is for, and only a press of its button sends the browser
// on to the authorization server. The authorization server sends the
// browser back to UserCallbackPath, which completes the authorization
// (Supervisor.CompleteAuthorization) when the browser is the one that
// pressed the button (a cookie set then); the caller then retries.
//
// The pages need no access token (a browser has none): what binds the
// flow to its caller is the flow's unguessable ID, given to the caller
// alone, the caller's name on the confirmation page, a same-site cookie
// the confirmation form must echo (so another site cannot press the
// button for a browser), and the cookie the callback must find (so a
// redirect the browser did not start through the page is refused).

const (
	// UserAuthorizePath is the confirmation page of a caller's pending
	// authorization of a per-user server.
	UserAuthorizePath = "/oauth/authorize"
	// UserCallbackPath is where the authorization servers of per-user
	// servers send the caller's browser back: the host sets
	// mcpvisor.OAuthOptions.UserRedirectURL to it (UserAuthorizationURLs).
	UserCallbackPath = "/oauth/callback"
	// CodeURLElicitationRequired (MCP 2025-11-25): the request needs the
	// user to open a URL first; the error's data lists it.
	CodeURLElicitationRequired = -32042
)

// UserAuthorizationURLs returns the redirect URL (for
// mcpvisor.OAuthOptions.UserRedirectURL) and the confirmation page URL
// (what callers are asked to open) of a gateway whose MCP endpoint is
// resource (ResourceServer.Resource).
func UserAuthorizationURLs(resource string) (redirect, confirm string, err error) {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return "", "", errors.Join(ErrInvalidOptions, err)
	}
	base := u.Scheme + "://" + u.Host
	return base + UserCallbackPath, base + UserAuthorizePath, nil
}

// UserAuthorizer is implemented by a Backend whose servers may have
// per-user credentials (*mcpvisor.Supervisor): the gateway serves its
// principals' authorization pages with it.
type UserAuthorizer interface {
	PendingAuthorization(flow string) (mcpvisor.AuthorizationRequest, bool)
	CompleteAuthorization(ctx context.Context, redirect url.Values) (server string, err error)
}

// userAuth serves the authorization pages.
//
// Concurrency: mu guards started; the pages' handlers run on the HTTP
// server's goroutines.
type userAuth struct {
	backend UserAuthorizer
	audit   Auditor // nil: no trail
	mu      sync.Mutex
	// started maps the state of each authorization a browser went on
	// with to the nonce of the cookie it was given, until its callback
	// or expiry.
	started map[string]startedFlow
}

type startedFlow struct {
	nonce     string
	expires   time.Time
	server    string
	principal string // its display name, for the trail
}

const (
	confirmCookie = "mcpvisor_confirm" // SameSite=Strict: echoed by the form
	flowCookie    = "mcpvisor_authz_"  // + a digest of the state; SameSite=Lax
	maxStarted    = 4096
)

// mount adds the pages to mux.
func (ua *userAuth) mount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+UserAuthorizePath, ua.serveConfirm)
	mux.HandleFunc("POST "+UserAuthorizePath, ua.serveContinue)
	mux.HandleFunc("GET "+UserCallbackPath, ua.serveCallback)
}

// isUserAuthPath reports whether path is one of the pages, which need no
// access token.
func isUserAuthPath(path string) bool {
	return path == UserAuthorizePath || path == UserCallbackPath
}

var confirmPage = template.Must(template.New("confirm").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Authorize {{.Server}}</title></head>
<body>
<h1>Authorize {{.Server}}</h1>
<p>The gateway will use <b>{{.Server}}</b> with your own account there, for <b>{{.Principal}}</b>.</p>
<p>If you are not {{.Principal}}, or did not just ask for this, close this page.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="flow" value="{{.Flow}}">
<input type="hidden" name="confirm" value="{{.Confirm}}">
<button type="submit">Continue to sign in</button>
</form>
</body></html>
`))

var donePage = template.Must(template.New("done").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

// pageHeaders are the headers of every page: never framed, never cached.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self' https: http:; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
}

func (ua *userAuth) serveConfirm(w http.ResponseWriter, r *http.Request) {
	flow := r.URL.Query().Get("flow")
	req, ok := ua.backend.PendingAuthorization(flow)
	if !ok {
		ua.page(w, http.StatusNotFound, "No pending authorization", "This authorization is unknown, done or expired. Retry the request that asked for it.")
		return
	}
	nonce := randomToken()
	http.SetCookie(w, &http.Cookie{Name: confirmCookie, Value: nonce, Path: UserAuthorizePath, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, Expires: req.Expires})
	pageHeaders(w)
	_ = confirmPage.Execute(w, map[string]string{
		"Server": req.Server, "Principal": req.PrincipalName, "Flow": flow, "Confirm": nonce, "Action": UserAuthorizePath,
	})
}

func (ua *userAuth) serveContinue(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		ua.page(w, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return
	}
	c, err := r.Cookie(confirmCookie)
	if err != nil || c.Value == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get("confirm"))) != 1 {
		ua.page(w, http.StatusForbidden, "Not confirmed", "Open the authorization link again and press the button on its page.")
		return
	}
	req, ok := ua.backend.PendingAuthorization(r.PostForm.Get("flow"))
	if !ok {
		ua.page(w, http.StatusNotFound, "No pending authorization", "This authorization is unknown, done or expired. Retry the request that asked for it.")
		return
	}
	au, err := url.Parse(req.URL)
	if err != nil || au.Query().Get("state") == "" {
		ua.page(w, http.StatusInternalServerError, "Cannot continue", "The authorization URL is not usable.")
		return
	}
	state := au.Query().Get("state")
	nonce := randomToken()
	now := time.Now()
	ua.mu.Lock()
	if ua.started == nil {
		ua.started = map[string]startedFlow{}
	}
	for st, sf := range ua.started {
		if now.After(sf.expires) {
			delete(ua.started, st)
		}
	}
	if len(ua.started) >= maxStarted {
		ua.mu.Unlock()
		ua.page(w, http.StatusServiceUnavailable, "Busy", "Too many authorizations are pending; try again in a few minutes.")
		return
	}
	ua.started[state] = startedFlow{nonce: nonce, expires: req.Expires, server: req.Server, principal: req.PrincipalName}
	ua.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: flowCookie + stateDigest(state), Value: nonce, Path: UserCallbackPath, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, Expires: req.Expires})
	http.SetCookie(w, &http.Cookie{Name: confirmCookie, Value: "", Path: UserAuthorizePath, MaxAge: -1})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, req.URL, http.StatusSeeOther)
}

func (ua *userAuth) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	ua.mu.Lock()
	sf, ok := ua.started[state]
	if ok {
		delete(ua.started, state)
	}
	ua.mu.Unlock()
	c, err := r.Cookie(flowCookie + stateDigest(state))
	if !ok || err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(sf.nonce)) != 1 {
		ua.page(w, http.StatusForbidden, "Authorization refused", "This browser did not start this authorization from the gateway's page.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: c.Name, Value: "", Path: UserCallbackPath, MaxAge: -1})
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	server, err := ua.backend.CompleteAuthorization(ctx, q)
	if ua.audit != nil {
		e := audit.Entry{Time: start, Action: audit.ActionAdmin, Op: "authorize", Subject: sf.principal, Server: sf.server,
			Duration: time.Since(start), Outcome: audit.OutcomeOK}
		if err != nil {
			e.Outcome, e.Reason = audit.OutcomeError, "the authorization did not complete"
		}
		ua.audit.Record(e)
	}
	if err != nil {
		ua.page(w, http.StatusBadRequest, "Authorization failed", "The authorization of "+server+" did not complete. Retry the request that asked for it.")
		return
	}
	ua.page(w, http.StatusOK, "Authorized", "The gateway may now use "+server+" for you. You may close this page and retry your request.")
}

func (ua *userAuth) page(w http.ResponseWriter, status int, title, text string) {
	pageHeaders(w)
	w.WriteHeader(status)
	_ = donePage.Execute(w, map[string]string{"Title": title, "Text": text})
}

// stateDigest names a flow's cookie without putting its state in a
// cookie name.
func stateDigest(state string) string {
	d := sha256.Sum256([]byte(state))
	return hex.EncodeToString(d[:8])
}

// urlElicitation is the data of a CodeURLElicitationRequired error.
type urlElicitation struct {
	Elicitations []urlElicitationItem `json:"elicitations"`
}

type urlElicitationItem struct {
	Mode          string `json:"mode"`
	ElicitationID string `json:"elicitationId"`
	URL           string `json:"url"`
	Message       string `json:"message"`
}

// authorizationRequired is the JSON-RPC error of a caller that must
// authorize server first: the URL (the confirmation page) is for that
// caller alone, in the message too, for clients that show only it.
func authorizationRequired(ar *mcpvisor.AuthorizationRequiredError) *protocol.Error {
	u := ar.URL
	msg := "server " + ar.Server + " needs your authorization: open " + u + " in a browser, then retry"
	e := protocol.NewError(CodeURLElicitationRequired, "%s", msg)
	e.Data, _ = json.Marshal(urlElicitation{Elicitations: []urlElicitationItem{{
		Mode: "url", ElicitationID: ar.Flow, URL: u, Message: "Authorize the gateway to use " + ar.Server + " for you",
	}}})
	return e
}
