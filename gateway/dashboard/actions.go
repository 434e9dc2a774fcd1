package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// Bounds of the dashboard's actions.
const (
	actionTimeout = 30 * time.Second
	// loginTimeout bounds a login the dashboard started: the user has
	// this long to finish in the browser.
	loginTimeout = 10 * time.Minute
	// loginURLWait bounds how long POST .../login waits for the
	// authorization URL (discovery and registration come first).
	loginURLWait  = 30 * time.Second
	maxActionBody = 4096
)

// actionResult is the body of a successful action.
type actionResult struct {
	OK bool `json:"ok"`
	// URL is the authorization URL of a login, for the page to open.
	URL string `json:"url,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// actionError answers a failed action with a status that says why.
func actionError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, mcpvisor.ErrUnknownServer), errors.Is(err, mcpvisor.ErrUnknownPermission):
		status = http.StatusNotFound
	case errors.Is(err, mcpvisor.ErrNeedsApproval), errors.Is(err, mcpvisor.ErrPermissionAnswered), errors.Is(err, ErrLoginInProgress):
		status = http.StatusConflict
	case errors.Is(err, mcpvisor.ErrPermissionExpired):
		status = http.StatusGone
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	}
	httpError(w, status, err.Error())
}

// decodeBody reads a small JSON body into v; an empty body leaves v as
// it is.
func (d *Dashboard) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	done := d.site.BodyDeadline(w)
	b, err := io.ReadAll(io.LimitReader(r.Body, maxActionBody+1))
	if err == nil {
		done()
	}
	if err != nil || len(b) > maxActionBody {
		httpError(w, http.StatusBadRequest, "bad body")
		return false
	}
	if len(b) == 0 {
		return true
	}
	if err := json.Unmarshal(b, v); err != nil {
		httpError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return false
	}
	return true
}

func (d *Dashboard) controller(w http.ResponseWriter) Controller {
	c, ok := d.site.Backend().(Controller)
	if !ok {
		httpError(w, http.StatusNotImplemented, "this gateway's backend cannot reconnect or toggle servers")
	}
	return c
}

// serveReconnect: POST /admin/servers/{name}/reconnect.
func (d *Dashboard) serveReconnect(w http.ResponseWriter, r *http.Request) {
	c := d.controller(w)
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if err := c.Server(r.PathValue("name")).Reconnect(ctx); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true})
}

// serveReconnectAll: POST /admin/reconnect: every server, or, for a
// caller under access rules, every server it may use.
func (d *Dashboard) serveReconnectAll(w http.ResponseWriter, r *http.Request) {
	c := d.controller(w)
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	reconnect := c.ReconnectAll
	if view := d.site.View(r); !view.All() {
		reconnect = func(ctx context.Context) error {
			var first error
			for _, s := range d.site.Backend().Status() {
				// As ReconnectAll: the servers that may start.
				if view.Server(s.Name) && s.State != mcpvisor.StateDisabled && s.State != mcpvisor.StateNeedsApproval {
					if err := c.Server(s.Name).Reconnect(ctx); err != nil && first == nil {
						first = err
					}
				}
			}
			return first
		}
	}
	if err := reconnect(ctx); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true})
}

// serveToggle: POST /admin/servers/{name}/toggle {"on": bool}.
func (d *Dashboard) serveToggle(w http.ResponseWriter, r *http.Request) {
	c := d.controller(w)
	if c == nil {
		return
	}
	var body struct {
		On *bool `json:"on"`
	}
	if !d.decodeBody(w, r, &body) {
		return
	}
	if body.On == nil {
		httpError(w, http.StatusBadRequest, `want {"on": true|false}`)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if err := c.Server(r.PathValue("name")).Toggle(ctx, *body.On); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true})
}

// serveReload: POST /admin/reload.
func (d *Dashboard) serveReload(w http.ResponseWriter, r *http.Request) {
	if d.opts.Reload == nil {
		httpError(w, http.StatusNotImplemented, "this gateway cannot reload its configuration")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if err := d.opts.Reload(ctx); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true})
}

// serveAnswer: POST /admin/permissions/{id} {"allow": bool}.
func (d *Dashboard) serveAnswer(w http.ResponseWriter, r *http.Request) {
	src, ok := d.site.Backend().(gateway.ChannelSource)
	if !ok {
		httpError(w, http.StatusNotImplemented, "this gateway's backend has no permission relay")
		return
	}
	var body struct {
		Allow *bool `json:"allow"`
	}
	if !d.decodeBody(w, r, &body) {
		return
	}
	if body.Allow == nil {
		httpError(w, http.StatusBadRequest, `want {"allow": true|false}`)
		return
	}
	if err := src.Channels().AnswerPermission(r.PathValue("id"), *body.Allow); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true})
}

// serveLoginServer: POST /admin/servers/{name}/login starts the server's
// OAuth login. With a LoginRelay the answer carries the authorization URL
// for the page to open (the login then waits up to loginTimeout for the
// browser's redirect); without one, the supervisor's OpenURL shows it.
// A machine grant needs no URL: the answer comes when it is done.
func (d *Dashboard) serveLoginServer(w http.ResponseWriter, r *http.Request) {
	src, ok := d.site.Backend().(gateway.ServerSource)
	if !ok {
		httpError(w, http.StatusNotImplemented, "this gateway's backend cannot log in")
		return
	}
	name := r.PathValue("name")
	var urls <-chan string
	release := func() {}
	if d.opts.Logins != nil {
		var err error
		if urls, release, err = d.opts.Logins.expect(name); err != nil {
			actionError(w, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), loginTimeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		defer release()
		done <- src.Server(name).Login(ctx, nil)
	}()
	go func() {
		select {
		case <-d.site.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	waitFor := loginURLWait
	if urls == nil {
		waitFor = 2 * time.Second // a quick failure still shows; the rest goes on
	}
	wait := time.NewTimer(waitFor)
	defer wait.Stop()
	select {
	case u := <-urls:
		writeJSON(w, http.StatusOK, actionResult{OK: true, URL: u})
	case err := <-done:
		if err != nil {
			actionError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, actionResult{OK: true})
	case <-wait.C:
		if urls == nil {
			// The supervisor's OpenURL showed it.
			writeJSON(w, http.StatusAccepted, actionResult{OK: true})
			return
		}
		cancel()
		httpError(w, http.StatusGatewayTimeout, "no authorization URL within "+loginURLWait.String())
	case <-r.Context().Done():
		cancel()
	}
}

// httpError answers a request with status and a plain-text message.
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
