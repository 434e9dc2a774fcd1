// Package httpclient builds the *http.Client every HTTP-based transport
// (Streamable HTTP, legacy SSE, WebSocket) uses for one server: the
// server's TLS settings, the proxy from the environment, and connection
// reuse sized for many concurrent calls.
package httpclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Options tune the client. The zero value is usable.
type Options struct {
	// DialTimeout bounds one TCP connect. Zero means 10 s.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds one TLS handshake. Zero means 10 s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers
	// (a server's slow first byte). Zero means no limit beyond the call's
	// own deadline.
	ResponseHeaderTimeout time.Duration
	// MaxConnsPerHost bounds the requests in flight to one host (a
	// response being read counts until its body is finished), and the
	// idle keep-alive connections kept for it. Zero means 64.
	MaxConnsPerHost int
	// Unlimited lifts MaxConnsPerHost, for a client shared by many
	// servers' sessions: each open event stream holds a connection, and a
	// cap would make the next session wait for one forever.
	Unlimited bool
	// Proxy picks the proxy of a request. Nil means
	// http.ProxyFromEnvironment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY);
	// loopback addresses are never proxied.
	Proxy func(*http.Request) (*url.URL, error)
}

// idleConnTimeout is how long an unused keep-alive connection is kept.
const idleConnTimeout = 90 * time.Second

// New returns a client for the server cfg describes. Its errors are
// *transports.ConfigError (an unreadable CA or key file).
func New(cfg transports.Config, opts Options) (*http.Client, error) {
	tlsConf, err := TLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.TLSHandshakeTimeout <= 0 {
		opts.TLSHandshakeTimeout = 10 * time.Second
	}
	if opts.MaxConnsPerHost <= 0 {
		opts.MaxConnsPerHost = 64
	}
	if opts.Proxy == nil {
		opts.Proxy = http.ProxyFromEnvironment
	}
	opts.Proxy = quietProxy(opts.Proxy)
	dialer := &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
	maxConns := opts.MaxConnsPerHost
	if opts.Unlimited {
		maxConns = 0
	}
	tr := &http.Transport{
		Proxy:                 opts.Proxy,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   opts.TLSHandshakeTimeout,
		ResponseHeaderTimeout: opts.ResponseHeaderTimeout,
		MaxIdleConns:          opts.MaxConnsPerHost,
		MaxIdleConnsPerHost:   opts.MaxConnsPerHost,
		MaxConnsPerHost:       maxConns,
		IdleConnTimeout:       idleConnTimeout,
		ForceAttemptHTTP2:     true,
	}
	inline := &inlineTransport{
		fallback:              tr,
		proxy:                 opts.Proxy,
		dial:                  dialer.DialContext,
		responseHeaderTimeout: opts.ResponseHeaderTimeout,
		maxInFlight:           maxConns,
		maxIdle:               opts.MaxConnsPerHost,
		idleTimeout:           idleConnTimeout,
		hosts:                 make(map[string]*inlineHost),
	}
	return &http.Client{
		Transport: inline,
		// A redirect would carry the session id and credentials to
		// another origin: MCP endpoints do not redirect, so refuse.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("refusing to follow a redirect to %s", transports.SafeURL(req.URL))
		},
	}, nil
}

// ErrProxy means the proxy of a request could not be chosen: most often
// HTTPS_PROXY or HTTP_PROXY is not a valid URL. The error does not say
// more, since the proxy's URL may hold its credentials.
var ErrProxy = errors.New("httpclient: choosing a proxy failed (is HTTPS_PROXY or HTTP_PROXY a valid URL?)")

// quietProxy returns proxy with its errors replaced by ErrProxy (a
// *transports.ConfigError): net/http's own quotes the proxy setting,
// user:password included.
func quietProxy(proxy func(*http.Request) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	return func(req *http.Request) (*url.URL, error) {
		u, err := proxy(req)
		if err != nil {
			return nil, &transports.ConfigError{Err: ErrProxy}
		}
		return u, nil
	}
}

// TLS builds a *tls.Config from a server's TLS settings; nil settings give
// nil (the defaults).
func TLS(c *transports.TLSConfig) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	conf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify,
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, &transports.ConfigError{Err: fmt.Errorf("tls.caFile: %w", err)}
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &transports.ConfigError{Err: fmt.Errorf("tls.caFile %s holds no PEM certificate", c.CAFile)}
		}
		conf.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, &transports.ConfigError{Err: errors.New("tls.certFile and tls.keyFile go together")}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, &transports.ConfigError{Err: fmt.Errorf("tls client certificate: %w", err)}
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// Header returns the configured headers as an http.Header, plus the
// User-Agent when the config sets none.
func Header(cfg transports.Config, userAgent string) http.Header {
	h := make(http.Header, len(cfg.Headers)+1)
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	if h.Get("User-Agent") == "" && userAgent != "" {
		h.Set("User-Agent", userAgent)
	}
	return h
}

// ParseURL checks a server URL: absolute, with one of the given schemes.
// Its errors name the URL without user info or query
// (transports.SafeURL).
func ParseURL(raw string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &transports.ConfigError{Err: fmt.Errorf("url: %w", transports.RedactURLError(err))}
	}
	for _, s := range schemes {
		if u.Scheme == s && u.Host != "" {
			return u, nil
		}
	}
	return nil, &transports.ConfigError{Err: fmt.Errorf("url %q: want an absolute %v URL", transports.SafeURL(u), schemes)}
}
