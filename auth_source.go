package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

// Authorization of remote servers. Every HTTP-based server (http, sse,
// ws) gets an oauth.Source, kept on its handle (so it survives a restart
// of the actor): its oauth.Transport wraps the server's HTTP client, so
// that every request — POST, GET stream, DELETE, reconnects — carries the
// bearer token, a token near expiry is refreshed first (single-flight),
// and a 401 gets one refresh and one retry. When the Source cannot answer
// a challenge without the user, the transport reports the 401/403, the
// server parks in needs-auth (no request to the server or its
// authorization server until Login or a call), and an EventAuthRequired
// names the scope needed.
//
// A server with OAuth settings or TLS settings gets its Source on first
// connect. One with neither, the usual server that never asks for
// authorization, gets it when it first needs one (lazySource): when the
// server first answers 401 or 403, or when OAuthOptions.Store holds
// credentials for its URL. Until then its requests go without a token,
// as they would through a Source with nothing to send, and the server
// costs no Source (about a kilobyte each).

// OAuthSettings parses the server's "oauth" member (nil when absent).
func (c *ServerConfig) OAuthSettings() (*OAuthConfig, error) {
	if len(c.OAuth) == 0 || string(c.OAuth) == "null" {
		return nil, nil
	}
	var o OAuthConfig
	if err := json.Unmarshal(c.OAuth, &o); err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	switch o.Grant {
	case "", oauth.GrantAuthorizationCode, oauth.GrantClientCredentials:
	case "jwt-bearer", oauth.GrantJWTBearer:
		o.Grant = oauth.GrantJWTBearer
	default:
		return nil, fmt.Errorf("oauth: unknown grant %q", o.Grant)
	}
	switch o.DPoP {
	case oauth.DPoPAuto, oauth.DPoPAlways, oauth.DPoPNever:
	default:
		return nil, fmt.Errorf("oauth: unknown dpop mode %q (want %q, %q or empty)", o.DPoP, oauth.DPoPAlways, oauth.DPoPNever)
	}
	switch o.Credentials {
	case "", CredentialsShared, CredentialsPerUser, CredentialsExchange:
	default:
		return nil, fmt.Errorf("oauth: unknown credentials %q (want %q, %q or %q)", o.Credentials, CredentialsShared, CredentialsPerUser, CredentialsExchange)
	}
	return &o, nil
}

// credentials is the server's credentials mode: CredentialsShared unless
// its OAuth settings say otherwise (a server whose settings do not parse
// fails its connect; its requests take the shared path to that error).
func (c *ServerConfig) credentials() string {
	s, err := c.OAuthSettings()
	if err != nil || s == nil || s.Credentials == "" {
		return CredentialsShared
	}
	return s.Credentials
}

// authHolder keeps a server's token source on its handle.
//
// Concurrency: mu guards every field; the server actor (building the
// source), connect goroutines and Login (using it) take it.
type authHolder struct {
	mu     sync.Mutex
	src    *oauth.Source // nil until first needed
	key    string        // the config the source was built for
	client *http.Client  // the server's own HTTP client, when it has TLS settings
	// stored is the config (key) for which OAuthOptions.Store was looked
	// up and held no credentials: a lazy source need not look again.
	stored string
}

// authKey identifies the config a server's source is built for.
func authKey(cfg *ServerConfig) string {
	return cfg.URL + "\x00" + string(cfg.OAuth)
}

// NewAuthSource returns the OAuth token source of a remote server, as the
// supervisor builds it: for tools that authorize outside a supervisor
// (mcpvisor auth login). Credentials go to o.Store. Its authorization
// traffic goes through a guarded client of its own (see
// OAuthOptions.AddressGuard), with the server's TLS settings.
func NewAuthSource(name string, cfg ServerConfig, o OAuthOptions, log zerolog.Logger) (*oauth.Source, error) {
	return newAuthSource(name, cfg, o, log, nil)
}

// newAuthSource is NewAuthSource with extra applied to the source's
// config last (nil: nothing).
func newAuthSource(name string, cfg ServerConfig, o OAuthOptions, log zerolog.Logger, extra func(*oauth.Config)) (*oauth.Source, error) {
	settings, err := cfg.OAuthSettings()
	if err != nil {
		return nil, err
	}
	asc, err := asClient(cfg, o)
	if err != nil {
		return nil, err
	}
	if settings == nil {
		settings = &OAuthConfig{}
	}
	oc := oauth.Config{
		ServerURL:             cfg.URL,
		ClientID:              settings.ClientID,
		ClientSecret:          settings.ClientSecret,
		ClientMetadataURL:     settings.ClientMetadataURL,
		ClientName:            "mcpvisor",
		Grant:                 settings.Grant,
		PrivateKeyPEM:         settings.PrivateKey,
		SigningAlgorithm:      settings.SigningAlgorithm,
		Enterprise:            settings.Enterprise,
		Workload:              settings.Workload,
		DPoP:                  settings.DPoP,
		Scopes:                settings.Scopes,
		AuthServerMetadataURL: settings.AuthServerMetadataURL,
		AllowNoPKCE:           settings.AllowMissingPKCE,
		RefreshMargin:         o.RefreshMargin,
		DefaultLifetime:       o.DefaultLifetime,
		HTTPClient:            asc,
		Store:                 o.Store,
		Now:                   o.Now,
		Logger:                log,
	}
	if settings.RefreshMarginMs > 0 {
		oc.RefreshMargin = time.Duration(settings.RefreshMarginMs) * time.Millisecond
	}
	if settings.PrivateKeyFile != "" && oc.PrivateKeyPEM == "" {
		b, err := os.ReadFile(settings.PrivateKeyFile)
		if err != nil {
			return nil, &transports.ConfigError{Err: fmt.Errorf("oauth privateKeyFile: %w", err)}
		}
		oc.PrivateKeyPEM = string(b)
	}
	if o.UserAgent != nil {
		oc.UserAgent = o.UserAgent(name)
	}
	if extra != nil {
		extra(&oc)
	}
	return oauth.NewSource(oc)
}

// authorizes reports whether connections with config cfg go through
// OAuth under options o.
func authorizes(cfg *ServerConfig, o *runOptions) bool {
	if o.OAuth.Disabled {
		return false
	}
	if k, ok := transports.Lookup(cfg.Kind()); !ok || !k.Authenticates {
		return false
	}
	s, err := cfg.OAuthSettings()
	return err != nil || s == nil || !s.Disabled
}

// authSource returns the token source of the server with config cfg,
// building it (or rebuilding it after a config change) when needed: the
// server actor's, and Login's for a server that has none yet (a parked
// server's handle is all Login needs; no actor is involved).
func (sh *serverHandle) authSource(cfg *ServerConfig, o *runOptions, log zerolog.Logger) (*oauth.Source, error) {
	h := &sh.auth
	h.mu.Lock()
	defer h.mu.Unlock()
	key := authKey(cfg)
	if h.src != nil && h.key == key {
		return h.src, nil
	}
	if cfg.TLS != nil && (h.client == nil || h.key != key) {
		// The server's own client, for its TLS settings (its requests
		// go through it; see httpClient).
		c, err := httpclient.New(cfg.Config, httpclient.Options{})
		if err != nil {
			return nil, err
		}
		h.client = c
	}
	src, err := NewAuthSource(sh.name, *cfg, o.OAuth, log)
	if err != nil {
		return nil, &transports.ConfigError{Err: err}
	}
	h.src, h.key = src, key
	return src, nil
}

// currentAuth returns the token source, if one was built.
func (h *serverHandle) currentAuth() *oauth.Source {
	h.auth.mu.Lock()
	defer h.auth.mu.Unlock()
	return h.auth.src
}

// authClient wraps the HTTP client (nil: the transport's own) of the
// server's connection with config cfg with the server's token source. It
// returns client unchanged for servers without authorization, and a
// config error the connect reports. The server actor calls it for each
// connect, on its goroutine.
func (sh *serverHandle) authClient(cfg *ServerConfig, o *runOptions, log zerolog.Logger, client *http.Client) (*http.Client, error) {
	if !authorizes(cfg, o) {
		return client, nil
	}
	if lazy, err := sh.lazyAuth(cfg, o, client); lazy != nil || err != nil {
		return lazy, err
	}
	src, err := sh.authSource(cfg, o, log)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = sh.auth.client // built by authSource for TLS settings
	}
	if client == nil {
		return nil, &transports.ConfigError{Err: errors.New("no HTTP client for the server")}
	}
	wrapped := *client
	wrapped.Transport = &oauth.Transport{Base: client.Transport, Source: src}
	return &wrapped, nil
}

// lazyAuth wraps client (the shared one: the server has no TLS settings)
// with a transport that creates the server's source when it is first
// needed (see lazySource). It returns nil for the servers whose source is
// built on connect: those with OAuth or TLS settings, and those that have
// a source already (for this config or an earlier one, which authSource
// replaces).
func (sh *serverHandle) lazyAuth(cfg *ServerConfig, o *runOptions, client *http.Client) (*http.Client, error) {
	if client == nil || cfg.TLS != nil {
		return nil, nil
	}
	if s, err := cfg.OAuthSettings(); err != nil || s != nil {
		return nil, nil
	}
	if sh.currentAuth() != nil {
		return nil, nil
	}
	// What NewAuthSource would refuse, refused on connect as before.
	if _, err := oauth.CanonicalResource(cfg.URL); err != nil {
		return nil, &transports.ConfigError{Err: err}
	}
	h, opts, url, key := sh, o, cfg.URL, authKey(cfg)
	wrapped := *client
	wrapped.Transport = &oauth.Transport{Base: client.Transport, Lazy: func(ctx context.Context, create bool) (*oauth.Source, error) {
		return h.lazySource(ctx, create, opts, url, key)
	}}
	return &wrapped, nil
}

// lazySource is the oauth.Transport.Lazy of a server without OAuth or TLS
// settings whose config is key (its URL url). Without create it returns
// the server's source if it has one, else creates it only when
// OAuthOptions.Store holds credentials for the URL (looked up once per
// config; a source reads the store once too); else nil: the request goes
// without a token. With create (the server answered 401 or 403) it
// returns the source, creating it. It runs in the transport's goroutines.
func (h *serverHandle) lazySource(ctx context.Context, create bool, opts *runOptions, url, key string) (*oauth.Source, error) {
	ah := &h.auth
	ah.mu.Lock()
	src, stored := ah.src, ah.stored == key
	if src != nil && ah.key != key {
		src = nil // a source of another config: this connection's is its own
	}
	ah.mu.Unlock()
	if src != nil {
		return src, nil
	}
	if !create {
		store := opts.OAuth.Store
		if stored || store == nil {
			return nil, nil // a new source's own memory store would be empty
		}
		canonical, err := oauth.CanonicalResource(url)
		if err != nil {
			return nil, err
		}
		e, err := store.Load(ctx, canonical, "")
		if err != nil {
			return nil, err
		}
		if e == nil {
			ah.mu.Lock()
			ah.stored = key
			ah.mu.Unlock()
			return nil, nil
		}
	}
	ah.mu.Lock()
	defer ah.mu.Unlock()
	if ah.src != nil && ah.key == key {
		return ah.src, nil // created meanwhile
	}
	cfg := ServerConfig{Config: transports.Config{URL: url}}
	src, err := NewAuthSource(h.name, cfg, opts.OAuth, serverLogger(opts.Logger, h.name))
	if err != nil {
		return nil, &transports.ConfigError{Err: err}
	}
	if ah.src == nil {
		ah.src, ah.key = src, key
	}
	return src, nil
}

// needsAuthEvent is the EventAuthRequired of server h, which just parked
// in needs-auth with err.
func needsAuthEvent(h *serverHandle, err error) eventRecord {
	info := struct {
		Scope  string `json:"scope,omitempty"`
		Issuer string `json:"issuer,omitempty"`
		Reason string `json:"reason,omitempty"`
	}{}
	var na *oauth.NeedsAuthError
	if errors.As(err, &na) {
		info.Scope, info.Reason = na.Scope, na.Reason
	}
	if src := h.currentAuth(); src != nil {
		st := src.Status()
		info.Issuer = st.Issuer
		if info.Scope == "" {
			info.Scope = st.NeedScope
		}
	}
	if info.Reason == "" && err != nil {
		info.Reason = err.Error()
	}
	data, _ := json.Marshal(info)
	return eventRecord{Type: EventAuthRequired, Data: data}
}

// status is the server's authorization status, for ServerStatus.
func (h *authHolder) status() *oauth.Status {
	h.mu.Lock()
	src := h.src
	h.mu.Unlock()
	if src == nil {
		return nil
	}
	st := src.Status()
	if st.Issuer == "" && !st.Authorized && st.NeedScope == "" {
		return nil // never asked for authorization
	}
	return &st
}

// Login authorizes server name and reconnects it. ua runs the user's part
// of the authorization code flow; nil means a loopback redirect on
// 127.0.0.1 with the URL shown through Options.OAuth.OpenURL (a browser,
// or the host's own prompt). Servers with a machine grant
// (client_credentials) need no user agent. A server held for approval is
// refused with ErrNeedsApproval, and nothing of it is contacted.
func (s *Supervisor) Login(ctx context.Context, name string, ua oauth.UserAgent) error {
	h, err := s.handle(name)
	if err != nil {
		return err
	}
	if cfg := h.view.Load().cfg; cfg.held() {
		// Nothing of a held server is contacted, its authorization
		// server included.
		return fmt.Errorf("%w: %q: approve it before logging in: %s", ErrNeedsApproval, name, cfg.NeedsApproval)
	}
	src := h.currentAuth()
	if src == nil {
		cfg := h.view.Load().cfg
		if !authorizes(&cfg, &s.opts) {
			return fmt.Errorf("mcpvisor: server %q does not use OAuth", name)
		}
		if src, err = h.authSource(&cfg, &s.opts, serverLogger(s.opts.Logger, name)); err != nil {
			return err
		}
	}
	if ua == nil {
		open := s.opts.OAuth.OpenURL
		if open == nil {
			return errors.New("mcpvisor: Login needs a user agent or OAuthOptions.OpenURL")
		}
		settings, _ := h.view.Load().cfg.OAuthSettings()
		host, port := "", 0
		if settings != nil {
			host, port = settings.CallbackHost, settings.CallbackPort
		}
		lb, err := oauth.NewLoopback(host, port, func(ctx context.Context, u string) error { return open(ctx, name, u) })
		if err != nil {
			return err
		}
		defer lb.Close()
		ua = lb
	}
	if err := src.Login(ctx, ua, ""); err != nil {
		return err
	}
	return s.reconnect(ctx, name)
}
