package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// loginCookie names the cookie the dashboard's token form sets.
const loginCookie = "mcpvisor_login"

// Bounds of the dashboard's login sessions.
const (
	loginLifetime = 12 * time.Hour
	maxLogins     = 256
)

// cookieSessions are the dashboard's logins: random ids handed out as an
// HttpOnly, SameSite=Strict cookie in exchange for the gateway's token,
// so that the browser never carries the token itself. At most maxLogins
// are kept (a new one evicts the oldest); each lasts loginLifetime.
//
// Concurrency: safe for concurrent use (mu guards ids).
type cookieSessions struct {
	now func() time.Time
	mu  sync.Mutex
	ids map[string]time.Time // id → expiry; guarded by mu
}

func newCookieSessions(now func() time.Time) *cookieSessions {
	return &cookieSessions{now: now, ids: map[string]time.Time{}}
}

// issue returns a new login id.
func (c *cookieSessions) issue() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, exp := range c.ids {
		if !now.Before(exp) {
			delete(c.ids, k)
		}
	}
	for len(c.ids) >= maxLogins {
		var oldest string
		var at time.Time
		for k, exp := range c.ids {
			if oldest == "" || exp.Before(at) {
				oldest, at = k, exp
			}
		}
		delete(c.ids, oldest)
	}
	c.ids[id] = now.Add(loginLifetime)
	return id
}

// valid reports whether id is a live login.
func (c *cookieSessions) valid(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.ids[id]
	if !ok {
		return false
	}
	if !c.now().Before(exp) {
		delete(c.ids, id)
		return false
	}
	return true
}

func (c *cookieSessions) revoke(id string) {
	c.mu.Lock()
	delete(c.ids, id)
	c.mu.Unlock()
}

// bearer returns the bearer token r carries, or "".
func bearer(r *http.Request) string {
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return got
}

// mutating wraps a state-changing admin endpoint: same origin only (see
// gateway.Site.SameOrigin), and a JSON body (or none), which a cross-origin form
// cannot send without a CORS preflight the gateway never grants. The
// token (or login cookie) was checked by guard.
func (d *Dashboard) mutating(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.site.SameOrigin(r) {
			d.site.Rejected()
			httpError(w, http.StatusForbidden, "forbidden: cross-origin request")
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				httpError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
				return
			}
		} else if r.ContentLength > 0 {
			httpError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
			return
		}
		next(w, r)
	}
}

// serveLogin takes the token form (application/x-www-form-urlencoded,
// field "token"): the right token gets a login cookie and a redirect to
// the dashboard; a wrong one 401 and the form again. Cross-origin posts
// are refused (login CSRF).
func (d *Dashboard) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !d.site.SameOrigin(r) {
		d.site.Rejected()
		httpError(w, http.StatusForbidden, "forbidden: cross-origin request")
		return
	}
	if !d.site.TokenRequired() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	done := d.site.BodyDeadline(w)
	err := r.ParseForm()
	if err == nil {
		done()
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad form")
		return
	}
	got := strings.TrimSpace(r.PostForm.Get("token"))
	if !d.site.TokenMatches(got) {
		d.site.Rejected()
		http.Redirect(w, r, "/?denied=1", http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: d.logins.issue(), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		MaxAge: int(loginLifetime / time.Second),
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// serveLogout ends the request's login.
func (d *Dashboard) serveLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(loginCookie); err == nil {
		d.logins.revoke(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}
