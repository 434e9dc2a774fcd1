package mcpvisor

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/oauth"
)

// Principals' authorizations of per-user servers. A principal's first
// request to such a server finds no tokens: the supervisor starts the
// authorization code flow (PKCE, RFC 8707 resource) with the principal's
// own token source, and the request fails with an
// AuthorizationRequiredError carrying the authorization URL. The
// principal's browser comes back to OAuthOptions.UserRedirectURL; the
// host's handler passes the redirect to CompleteAuthorization, which
// finds the flow by its state, and the source exchanges the code and
// keeps the tokens under the principal. One flow per server and principal
// is pending at a time; it is given up after
// OAuthOptions.UserAuthorizationTimeout.

// AuthorizationRequest describes a pending authorization, for a host that
// asks the principal to confirm before its browser goes on to the
// authorization server (the gateway's page at /oauth/authorize).
type AuthorizationRequest struct {
	Server        string
	Principal     string // Principal.ID
	PrincipalName string // Principal.DisplayName
	// URL is the authorization server's authorization URL: the
	// principal's alone, never logged.
	URL     string
	Expires time.Time
}

// userFlows are the pending authorizations of principals.
//
// Concurrency: mu guards the maps; each flow's authorization runs in a
// goroutine of its own (counted by running, which Close waits for).
type userFlows struct {
	mu      sync.Mutex
	byKey   map[string]*userFlow // by server and principal
	byID    map[string]*userFlow
	byState map[string]*userFlow
	running sync.WaitGroup
	closed  bool
}

// userFlow is one pending authorization.
type userFlow struct {
	id, key, server string
	principal       Principal // without AccessToken
	expires         time.Time
	cancel          context.CancelFunc

	// urlSet is closed once url is set, or the flow has ended without
	// one; url is not written after.
	urlSet  chan struct{}
	urlOnce sync.Once
	url     string

	callback chan url.Values // the redirect's query (1-buffered)
	// done is closed when the authorization has ended, err its outcome.
	done chan struct{}
	err  error
}

// require starts (or finds) principal p's authorization of server with
// src, and returns the AuthorizationRequiredError the request fails with,
// once the authorization URL is known (or why there is none).
func (f *userFlows) require(ctx context.Context, s *Supervisor, server string, p Principal, src *oauth.Source) error {
	redirect := s.opts.OAuth.UserRedirectURL
	if redirect == "" {
		return fmt.Errorf("server %q: %w", server, ErrNoUserRedirect)
	}
	key := server + "\x00" + p.ID
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	fl := f.byKey[key]
	if fl != nil && (fl.ended() || time.Now().After(fl.expires)) {
		f.forgetLocked(fl)
		fl = nil
	}
	if fl == nil {
		if src == nil { // pending a moment ago, and ended since
			f.mu.Unlock()
			return &NotReadyError{Server: server, State: StateNeedsAuth, Cause: errors.New("the authorization just ended: retry")}
		}
		fl = f.startLocked(s, key, server, p, src, redirect)
	}
	f.mu.Unlock()
	select {
	case <-fl.urlSet:
	case <-ctx.Done():
		return &NotReadyError{Server: server, State: StateNeedsAuth, Waited: context.Cause(ctx)}
	}
	if fl.url == "" {
		<-fl.done // the flow ended without a URL: its error is set
		return &NotReadyError{Server: server, State: StateNeedsAuth, Cause: fl.err}
	}
	open := fl.url
	if c := s.opts.OAuth.UserConfirmURL; c != "" {
		open = c + "?flow=" + url.QueryEscape(fl.id)
	}
	return &AuthorizationRequiredError{Server: server, Principal: p.ID, Flow: fl.id, URL: open, Expires: fl.expires}
}

// pending reports whether principal's authorization of server is
// pending.
func (f *userFlows) pending(server, principal string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.byKey[server+"\x00"+principal]
	return fl != nil && !fl.ended() && time.Now().Before(fl.expires)
}

// startLocked starts a flow. f.mu is held.
func (f *userFlows) startLocked(s *Supervisor, key, server string, p Principal, src *oauth.Source, redirect string) *userFlow {
	timeout := s.opts.OAuth.UserAuthorizationTimeout
	if timeout <= 0 {
		timeout = defaultUserAuthorizationTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	fl := &userFlow{
		id: randomID(), key: key, server: server,
		principal: Principal{ID: p.ID, Name: p.Name},
		expires:   time.Now().Add(timeout),
		cancel:    cancel,
		urlSet:    make(chan struct{}),
		callback:  make(chan url.Values, 1),
		done:      make(chan struct{}),
	}
	if f.byKey == nil {
		f.byKey, f.byID, f.byState = map[string]*userFlow{}, map[string]*userFlow{}, map[string]*userFlow{}
	}
	f.byKey[key], f.byID[fl.id] = fl, fl
	f.running.Add(1)
	routine.Go("supervisor.user-authorization", func() {
		defer f.running.Done()
		defer cancel()
		fl.err = src.Login(ctx, &flowAgent{flows: f, flow: fl, redirect: redirect}, "")
		if fl.err != nil {
			s.log.Info().Str("server", server).Str("principal", p.ID).Err(fl.err).Msg("a principal's authorization ended without tokens")
		}
		fl.urlOnce.Do(func() { close(fl.urlSet) })
		close(fl.done)
		f.mu.Lock()
		f.forgetLocked(fl)
		f.mu.Unlock()
	})
	return fl
}

// ended reports whether the flow's authorization has ended.
func (fl *userFlow) ended() bool {
	select {
	case <-fl.done:
		return true
	default:
		return false
	}
}

// forgetLocked removes fl from the maps. f.mu is held.
func (f *userFlows) forgetLocked(fl *userFlow) {
	if f.byKey[fl.key] == fl {
		delete(f.byKey, fl.key)
	}
	if f.byID[fl.id] == fl {
		delete(f.byID, fl.id)
	}
	for st, x := range f.byState {
		if x == fl {
			delete(f.byState, st)
		}
	}
}

// close gives up every pending authorization and waits for them to end.
func (f *userFlows) close() {
	f.mu.Lock()
	f.closed = true
	for _, fl := range f.byID {
		fl.cancel()
	}
	f.mu.Unlock()
	f.running.Wait()
}

// flowAgent is the oauth.UserAgent of a principal's flow: it publishes
// the authorization URL (require returns it) and waits for the redirect
// CompleteAuthorization delivers.
type flowAgent struct {
	flows    *userFlows
	flow     *userFlow
	redirect string
}

func (a *flowAgent) RedirectURI() string { return a.redirect }

func (a *flowAgent) Authorize(ctx context.Context, authURL string) (url.Values, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, fmt.Errorf("mcpvisor: authorization URL without state")
	}
	a.flows.mu.Lock()
	a.flows.byState[state] = a.flow
	a.flows.mu.Unlock()
	a.flow.urlOnce.Do(func() {
		a.flow.url = authURL
		close(a.flow.urlSet)
	})
	select {
	case q := <-a.flow.callback:
		return q, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("mcpvisor: the principal did not come back from the authorization server: %w", context.Cause(ctx))
	}
}

// CompleteAuthorization finishes a principal's authorization of a
// per-user server with the query of the redirect its browser brought to
// OAuthOptions.UserRedirectURL: the pending authorization is found by
// its state (once: a state is good for one redirect), the code is
// exchanged and the tokens kept under the principal. It returns the
// server's name, and the authorization's error (the authorization
// server's error=…, a refused code exchange), or ErrUnknownAuthorization
// for a redirect of no pending authorization.
func (s *Supervisor) CompleteAuthorization(ctx context.Context, redirect url.Values) (server string, err error) {
	f := &s.principals.flows
	f.mu.Lock()
	fl := f.byState[redirect.Get("state")]
	if fl != nil {
		delete(f.byState, redirect.Get("state"))
	}
	f.mu.Unlock()
	if fl == nil {
		return "", ErrUnknownAuthorization
	}
	select {
	case fl.callback <- redirect:
	default:
	}
	select {
	case <-fl.done:
		if fl.err != nil {
			return fl.server, fmt.Errorf("mcpvisor: authorizing %q: %w", fl.server, fl.err)
		}
		return fl.server, nil
	case <-ctx.Done():
		return fl.server, ctx.Err()
	}
}

// PendingAuthorization returns the pending authorization flow names (an
// AuthorizationRequiredError's Flow), if it is still pending.
func (s *Supervisor) PendingAuthorization(flow string) (AuthorizationRequest, bool) {
	f := &s.principals.flows
	f.mu.Lock()
	fl := f.byID[flow]
	f.mu.Unlock()
	if fl == nil || fl.ended() {
		return AuthorizationRequest{}, false
	}
	select {
	case <-fl.urlSet:
	default:
		return AuthorizationRequest{}, false // no URL yet
	}
	if fl.url == "" {
		return AuthorizationRequest{}, false
	}
	return AuthorizationRequest{
		Server: fl.server, Principal: fl.principal.ID, PrincipalName: fl.principal.DisplayName(),
		URL: fl.url, Expires: fl.expires,
	}, true
}

// randomID is 128 random bits, URL-safe.
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
