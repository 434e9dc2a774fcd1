package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/etcdstore"
	"github.com/mcpvisor/mcpvisor/internal/userdirs"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/oauth/secretstore"
	"github.com/mcpvisor/mcpvisor/transports"
)

// envTokenStore overrides where the CLI keeps OAuth credentials in a
// file (the file store, and the file an OS store migrates from).
const envTokenStore = "MCPVISOR_TOKEN_STORE"

// envTokenStoreBackend chooses the token store when --token-store is not
// given.
const envTokenStoreBackend = "MCPVISOR_TOKEN_STORE_BACKEND"

// tokenStorePath is the CLI's OAuth credential file: $MCPVISOR_TOKEN_STORE,
// else oauth-tokens.json in the user config directory (on Windows, the
// local state directory: %APPDATA% roams to other machines).
func tokenStorePath() string {
	if p := os.Getenv(envTokenStore); p != "" {
		return p
	}
	dir, err := userdirs.ConfigDir()
	if runtime.GOOS == "windows" {
		dir, err = userdirs.StateDir()
	}
	if err != nil {
		dir = "."
	}
	return filepath.Join(dir, "oauth-tokens.json")
}

// tokenStore is the CLI's OAuth token store (--token-store), shared by
// auth, list, call and supervise. It is opened on first use and kept.
// Owned by cobra's goroutine (see app): open is not called concurrently.
type tokenStore struct {
	backend string     // --token-store
	etcd    *etcdFlags // the app's --etcd-* flags, for --token-store etcd
	out     *output

	store oauth.Store      // set by open, once
	info  secretstore.Info // what open chose
}

// open returns the CLI's token store, opened on first use: --token-store, else
// $MCPVISOR_TOKEN_STORE_BACKEND, else the file when $MCPVISOR_TOKEN_STORE
// names one, else auto (the OS secret store where it works). An OS store
// takes over the file store's entries on first use.
func (t *tokenStore) open(ctx context.Context) (oauth.Store, secretstore.Info, error) {
	if t.store != nil {
		return t.store, t.info, nil
	}
	backend := t.backend
	if backend == "" {
		backend = os.Getenv(envTokenStoreBackend)
	}
	if backend == "" {
		backend = secretstore.BackendAuto
		if os.Getenv(envTokenStore) != "" {
			backend = secretstore.BackendFile
		}
	}
	if backend == backendEtcd {
		c, err := t.etcd.etcdClient()
		if err != nil {
			return nil, secretstore.Info{}, usageError("--token-store etcd: %v", err)
		}
		t.store = etcdstore.NewTokenStore(c, etcdstore.Options{Prefix: t.etcd.prefix})
		t.info = secretstore.Info{Backend: backendEtcd, Where: t.etcd.where()}
		t.out.log.Debug().Str("backend", backendEtcd).Str("where", t.info.Where).Msg("OAuth token store")
		return t.store, t.info, nil
	}
	lockDir, err := userdirs.StateDir()
	if err != nil {
		lockDir = "" // beside the file
	}
	st, info, err := secretstore.Open(ctx, secretstore.Options{Backend: backend, File: tokenStorePath(), LockDir: lockDir})
	if errors.Is(err, secretstore.ErrUnknownBackend) {
		return nil, info, usageError("--token-store: %v", err)
	}
	if err != nil {
		return nil, info, failed(fmt.Errorf("token store: %w", err))
	}
	t.store, t.info = st, info
	ev := t.out.log.Debug()
	if info.Migrated > 0 {
		ev = t.out.log.Info()
	}
	ev.Str("backend", info.Backend).Str("where", info.Where).Str("fallback", info.Fallback).
		Int("migrated", info.Migrated).Msg("OAuth token store")
	return st, info, nil
}

// oauthOptions are the OAuth options of every supervisor the CLI starts:
// credentials in the CLI's token store (so that `auth login` serves
// `supervise`, `list` and `call`), login URLs opened in the browser.
func (t *tokenStore) oauthOptions(ctx context.Context) (mcpvisor.OAuthOptions, error) {
	st, _, err := t.open(ctx)
	if err != nil {
		return mcpvisor.OAuthOptions{}, err
	}
	return mcpvisor.OAuthOptions{
		Store:   st,
		OpenURL: t.out.authURLOpener(hasBrowser(runtime.GOOS, os.Getenv)),
	}, nil
}

// authURLOpener is how the command shows a login's authorization URL:
// written to stderr in the stream's one format — a JSON log line (level
// info, the URL in url, the server in server) when the logs are JSON,
// else a sentence and the URL on its own line — whatever --log-level
// says, since the user has to act on it; then, when browser is true,
// opened in the browser. A URL other than http(s) is refused with
// oauth.ErrInsecureEndpoint and shown nowhere.
func (o *output) authURLOpener(browser bool) func(ctx context.Context, server, authURL string) error {
	return func(ctx context.Context, server, authURL string) error {
		if err := oauth.CheckAuthorizationURL(authURL); err != nil {
			return err
		}
		if o.jsonLogs() {
			l := zerolog.New(o.stderr).With().Timestamp().Logger()
			l.WithLevel(zerolog.InfoLevel).Str("server", server).Str("url", authURL).Msg("open this URL to authorize")
		} else {
			fmt.Fprintf(o.stderr, "Open this URL to authorize %s:\n\n  %s\n\n", server, authURL)
		}
		if !browser {
			return nil
		}
		return oauth.LaunchBrowser(ctx, authURL)
	}
}

// authCmd is `mcpvisor auth` and its login, logout and status. It runs
// in cobra's goroutine.
type authCmd struct{ *app }

func (a authCmd) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Authorize remote servers (OAuth): login, logout, status",
		Long: `auth manages the OAuth credentials of remote servers, which supervise, list
and call use too. They are kept in the OS secret store where one works (macOS
Keychain, Windows Credential Manager, the Secret Service of GNOME Keyring or
KWallet), else in the file ` + "$" + envTokenStore + ` or <user config dir>/mcpvisor/oauth-tokens.json
(owner-only); --token-store (or ` + "$" + envTokenStoreBackend + `) chooses: auto, file,
secret-service, keyctl (Linux kernel keyring, lost at reboot), keychain, wincred.
An OS store takes over the file's entries on first use and removes the file.
auth status says which store is in use. Tokens are never printed.`,
	}
	cmd.AddCommand(a.loginCommand(), a.logoutCommand(), a.statusCommand())
	return cmd
}

// server finds a remote server of the configuration.
func (a authCmd) server(name string) (mcpvisor.ServerConfig, error) {
	cfg, err := a.configs.load()
	if err != nil {
		a.configs.logError(err)
		return mcpvisor.ServerConfig{}, failed(nil)
	}
	sc, ok := cfg.Servers[name]
	if !ok {
		return sc, failed(fmt.Errorf("no server %q in the configuration", name))
	}
	if sc.NeedsApproval != "" {
		return sc, failed(fmt.Errorf("server %q needs approval first (%s): run 'mcpvisor trust'", name, sc.NeedsApproval))
	}
	if k, ok := transports.Lookup(sc.Kind()); ok && k.Authenticates {
		return sc, nil
	}
	return sc, failed(fmt.Errorf("server %q is not remote (%s): it takes credentials from its environment", name, sc.Kind()))
}

func (a authCmd) loginCommand() *cobra.Command {
	var (
		scope     string
		noBrowser bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "login SERVER",
		Short: "Authorize a remote server in the browser (OAuth authorization code flow with PKCE)",
		Long: `login runs the OAuth authorization of SERVER: discovery, client registration
when needed, then the authorization code flow with PKCE. The redirect comes back
to a listener on 127.0.0.1 (an ephemeral port unless the server's oauth.callbackPort
says otherwise). The authorization URL is printed on stderr and opened in the
browser when there is one (--no-browser: printed only). Servers configured with
"grant": "client_credentials" are authorized without a browser.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			sc, err := a.server(args[0])
			if err != nil {
				return err
			}
			oo, err := a.tokens.oauthOptions(ctx)
			if err != nil {
				return err
			}
			src, err := mcpvisor.NewAuthSource(args[0], sc, oo, a.libLog)
			if err != nil {
				return failed(err)
			}
			settings, err := sc.OAuthSettings()
			if err != nil {
				return failed(err)
			}
			host, port := "", 0
			if settings != nil {
				host, port = settings.CallbackHost, settings.CallbackPort
			}
			show := a.authURLOpener(!noBrowser && hasBrowser(runtime.GOOS, os.Getenv))
			lb, err := oauth.NewLoopback(host, port, func(ctx context.Context, u string) error {
				return show(ctx, args[0], u)
			})
			if err != nil {
				return failed(err)
			}
			defer lb.Close()
			if err := src.Login(ctx, lb, scope); err != nil {
				return failed(fmt.Errorf("login to %s: %w", args[0], err))
			}
			st := src.Status()
			fmt.Fprintf(a.stdout, "authorized %s (issuer %s, scope %q, expires %s)\n", args[0], st.Issuer, st.Scope, st.Expiry.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "", "scope to request (default: what the server asks for)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "print the authorization URL without opening a browser")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the authorization")
	return cmd
}

func (a authCmd) logoutCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "logout SERVER",
		Short: "Forget a remote server's tokens (its client registration is kept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := a.server(args[0])
			if err != nil {
				return err
			}
			oo, err := a.tokens.oauthOptions(cmd.Context())
			if err != nil {
				return err
			}
			src, err := mcpvisor.NewAuthSource(args[0], sc, oo, a.libLog)
			if err != nil {
				return failed(err)
			}
			if err := src.Logout(cmd.Context()); err != nil {
				return failed(err)
			}
			fmt.Fprintf(a.stdout, "logged out of %s\n", args[0])
			return nil
		},
	}
}

// authStatusRow is one line of `auth status`.
type authStatusRow struct {
	Server     string    `json:"server,omitempty"`
	URL        string    `json:"url"`
	Issuer     string    `json:"issuer,omitempty"`
	ClientID   string    `json:"clientId,omitempty"`
	State      string    `json:"state"` // authorized, expired, refreshable, none
	Expiry     time.Time `json:"expiry,omitzero"`
	Scope      string    `json:"scope,omitempty"`
	HasRefresh bool      `json:"hasRefreshToken"`
}

func (a authCmd) statusCommand() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the stored OAuth credentials of the configured remote servers (never the tokens)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, info, err := a.tokens.open(cmd.Context())
			if err != nil {
				return err
			}
			entries, err := store.List(cmd.Context())
			if err != nil {
				return failed(err)
			}
			names := map[string]string{} // canonical URL → server name
			if cfg, err := a.configs.load(); err == nil {
				for name, sc := range cfg.Servers {
					if c, err := oauth.CanonicalResource(sc.URL); err == nil && sc.URL != "" {
						names[c] = name
					}
				}
			}
			now := time.Now()
			var rows []authStatusRow
			seen := map[string]bool{}
			for _, e := range entries {
				r := authStatusRow{Server: names[e.ServerURL], URL: e.ServerURL, Issuer: e.Issuer, State: "none", Scope: e.Scope}
				if e.Client != nil {
					r.ClientID = e.Client.ClientID
				}
				if t := e.Token; t != nil && t.AccessToken != "" {
					r.Expiry, r.HasRefresh = t.Expiry, t.RefreshToken != ""
					switch {
					case t.Valid(now):
						r.State = "authorized"
					case t.RefreshToken != "":
						r.State = "refreshable"
					default:
						r.State = "expired"
					}
				}
				seen[e.ServerURL] = true
				rows = append(rows, r)
			}
			for c, name := range names {
				if !seen[c] {
					rows = append(rows, authStatusRow{Server: name, URL: c, State: "none"})
				}
			}
			slices.SortFunc(rows, func(x, y authStatusRow) int {
				if x.Server != y.Server {
					if x.Server < y.Server {
						return -1
					}
					return 1
				}
				if x.URL < y.URL {
					return -1
				}
				return 1
			})
			if jsonOut {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"backend": info.Backend, "store": info.Where,
					"fallback": info.Fallback, "servers": rows})
			}
			fmt.Fprintf(a.stdout, "Token store: %s\n\n", info)
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tSTATE\tISSUER\tEXPIRES\tSCOPE")
			for _, r := range rows {
				exp := "-"
				if !r.Expiry.IsZero() {
					exp = r.Expiry.Local().Format(time.RFC3339)
				}
				name := r.Server
				if name == "" {
					name = r.URL
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.State, r.Issuer, exp, r.Scope)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}
