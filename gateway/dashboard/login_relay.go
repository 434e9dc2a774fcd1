package dashboard

import (
	"context"
	"errors"
	"sync"

	"github.com/mcpvisor/mcpvisor"
)

// LoginRelay hands the authorization URL of an OAuth login the dashboard
// started to the page that asked for it, which opens it in the user's
// browser, instead of a browser on the gateway's machine. Logins nobody
// waits for go to the OpenURL the supervisor was configured with.
// Wire it like gateway.Forwarder: Configure the supervisor's Options with it,
// and give it to Options.Logins.
//
// Concurrency: safe for concurrent use (mu guards waiting).
type LoginRelay struct {
	mu      sync.Mutex
	waiting map[string]chan string // server → where its next authorization URL goes; guarded by mu
}

// ErrLoginInProgress: the dashboard already started a login of that
// server, and it has not ended.
var ErrLoginInProgress = errors.New("dashboard: a login of this server is in progress")

// Configure makes o's OAuthOptions.OpenURL deliver URLs to the dashboard
// logins that wait for them, and pass the others to the OpenURL o had.
func (l *LoginRelay) Configure(o *mcpvisor.Options) {
	inner := o.OAuth.OpenURL
	o.OAuth.OpenURL = func(ctx context.Context, server, authURL string) error {
		if l.deliver(server, authURL) {
			return nil
		}
		if inner == nil {
			return errors.New("dashboard: no way to show the authorization URL")
		}
		return inner(ctx, server, authURL)
	}
}

// expect registers a login of server: its authorization URL goes to the
// returned channel (buffered) until done is called.
func (l *LoginRelay) expect(server string) (urls <-chan string, done func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting == nil {
		l.waiting = map[string]chan string{}
	}
	if _, busy := l.waiting[server]; busy {
		return nil, nil, ErrLoginInProgress
	}
	ch := make(chan string, 1)
	l.waiting[server] = ch
	return ch, func() {
		l.mu.Lock()
		if l.waiting[server] == ch {
			delete(l.waiting, server)
		}
		l.mu.Unlock()
	}, nil
}

func (l *LoginRelay) deliver(server, authURL string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.waiting[server]
	if !ok {
		return false
	}
	select {
	case ch <- authURL:
	default: // a second URL of the same login (a scope step-up): the page has the first
	}
	return true
}
