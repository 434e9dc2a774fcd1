package oauth

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"
)

// Loopback is the UserAgent of an interactive login (RFC 8252 §7.3): it
// binds a loopback listener first (so the redirect URI it registers is
// the one it serves), shows the authorization URL through Open, and
// serves the one redirect. Its HTTP server runs only inside Authorize.
type Loopback struct {
	ln       net.Listener
	redirect string
	open     func(ctx context.Context, authURL string) error
}

// NewLoopback listens on host:port (default 127.0.0.1 and an ephemeral
// port); open shows the authorization URL (nil: OpenBrowser).
func NewLoopback(host string, port int, open func(ctx context.Context, authURL string) error) (*Loopback, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	if !isLoopbackHost(host) {
		return nil, fmt.Errorf("oauth: callback host %q is not a loopback address", host)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("oauth: callback listener: %w", err)
	}
	if open == nil {
		open = OpenBrowser
	}
	p := ln.Addr().(*net.TCPAddr).Port
	return &Loopback{ln: ln, open: open, redirect: "http://" + net.JoinHostPort(host, strconv.Itoa(p)) + "/callback"}, nil
}

// RedirectURI implements UserAgent.
func (l *Loopback) RedirectURI() string { return l.redirect }

// Close releases the listener.
func (l *Loopback) Close() error { return l.ln.Close() }

// Authorize implements UserAgent: it shows authURL and waits for the
// redirect (or ctx's end).
func (l *Loopback) Authorize(ctx context.Context, authURL string) (url.Values, error) {
	u, err := url.Parse(authURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%w: authorization URL %q", ErrInsecureEndpoint, authURL)
	}
	got := make(chan url.Values, 1)
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/callback" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><title>mcpvisor</title><p>Authorization received; you may close this window.</p>\n")
			select {
			case got <- r.URL.Query():
			default:
			}
		}),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l.ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()
	if err := l.open(ctx, authURL); err != nil {
		return nil, err
	}
	select {
	case q := <-got:
		return q, nil
	case err := <-served:
		served <- err
		return nil, fmt.Errorf("oauth: callback server: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// OpenBrowser opens authURL in the user's browser (LaunchBrowser) and
// prints it to stderr as well. It does not look for a graphical session
// (the library reads no environment variable): a caller on a machine
// without one uses PrintURL instead.
func OpenBrowser(ctx context.Context, authURL string) error {
	if _, err := printURL(authURL); err != nil {
		return err
	}
	return LaunchBrowser(ctx, authURL)
}

// LaunchBrowser opens authURL in the user's browser (xdg-open, open, or
// rundll32 — executed directly, never through a shell, and given at most
// 10 s to hand it over) and prints nothing: for a caller that shows the
// URL itself. A URL other than http(s) is refused with
// ErrInsecureEndpoint; a missing or failing opener is not an error (the
// user still has the URL the caller showed).
func LaunchBrowser(ctx context.Context, authURL string) error {
	u, err := checkAuthURL(authURL)
	if err != nil {
		return err
	}
	var name string
	var args []string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil
	}
	// The opener hands the URL to the browser and exits.
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = exec.CommandContext(octx, path, append(args, u.String())...).Run()
	return nil
}

// PrintURL prints authURL to stderr for the user to open: the opener for
// a machine without a graphical session.
func PrintURL(_ context.Context, authURL string) error {
	_, err := printURL(authURL)
	return err
}

// printURL checks that authURL is an http(s) URL and prints it to stderr.
func printURL(authURL string) (*url.URL, error) {
	u, err := checkAuthURL(authURL)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "Open this URL to authorize:\n\n  %s\n\n", authURL)
	return u, nil
}

// CheckAuthorizationURL refuses, with ErrInsecureEndpoint, an
// authorization URL that OpenBrowser, LaunchBrowser and PrintURL would
// refuse: anything but an http(s) URL. For an opener that shows the URL
// its own way.
func CheckAuthorizationURL(authURL string) error {
	_, err := checkAuthURL(authURL)
	return err
}

// checkAuthURL parses authURL and refuses anything but http(s) with
// ErrInsecureEndpoint.
func checkAuthURL(authURL string) (*url.URL, error) {
	u, err := url.Parse(authURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%w: authorization URL %q", ErrInsecureEndpoint, authURL)
	}
	return u, nil
}
