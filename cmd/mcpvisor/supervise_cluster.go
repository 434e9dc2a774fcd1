package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// clusterFlags are the flags of `supervise --cluster` (docs/cluster.md).
type clusterFlags struct {
	on           bool
	name         string
	addr         string // host:port of the member's remote (gRPC) endpoint
	providerPort int
	peers        []string
	labels       []string
	refresh      time.Duration
	membership   string // "peers" (automanaged) or "etcd"
	tlsCert      string // mutual TLS between members: this member's certificate,
	tlsKey       string // its key,
	tlsCA        string // and the CA that signs every member's certificate
}

func (c *clusterFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&c.on, "cluster", false, "run as a member of a cluster of supervise processes: the gateway serves every member's servers (docs/cluster.md)")
	fl.StringVar(&c.name, "cluster-name", "mcpvisor", "with --cluster: the cluster's `NAME` (members of other names are ignored)")
	fl.StringVar(&c.addr, "cluster-addr", "", "with --cluster: this member's remote endpoint `HOST:PORT` (required)")
	fl.IntVar(&c.providerPort, "cluster-membership-port", 0, "with --cluster: the `PORT` of this member's membership endpoint, on the --cluster-addr host (required)")
	fl.StringSliceVar(&c.peers, "cluster-peers", nil, "with --cluster: every member's membership endpoint `HOST:PORT`, this one included (comma-separated or repeated)")
	fl.DurationVar(&c.refresh, "cluster-refresh", time.Second, "with --cluster: how often the member re-reads the cluster-wide pool besides the changes other members push")
	fl.StringVar(&c.membership, "cluster-membership", "peers", "with --cluster: how members find each other: `peers` (the static --cluster-peers list; tests, a local demo) or etcd (the --etcd-endpoint flags; production)")
	fl.StringVar(&c.tlsCert, "cluster-tls-cert", "", "with --cluster: this member's certificate `FILE` (PEM) for mutual TLS between members; it must allow server and client use and name the --cluster-addr host (docs/cluster.md)")
	fl.StringVar(&c.tlsKey, "cluster-tls-key", "", "with --cluster-tls-cert: the certificate's private key `FILE` (PEM)")
	fl.StringVar(&c.tlsCA, "cluster-tls-ca", "", "with --cluster-tls-cert: the `FILE` (PEM) of the CA that signs every member's certificate; only members whose certificate it signed are served")
	fl.StringArrayVar(&c.labels, "cluster-label", nil, "with --cluster: a `KEY=VALUE` label of this member (repeatable); servers whose \"nodes\" names it may run here")
}

// options checks the flags and returns the member's options.
func (c *clusterFlags) options() (cluster.Options, error) {
	var o cluster.Options
	host, port, err := net.SplitHostPort(c.addr)
	if err != nil {
		return o, usageError("--cluster-addr %q: %v", c.addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return o, usageError("--cluster-addr %q: bad port", c.addr)
	}
	if c.tlsCert != "" || c.tlsKey != "" || c.tlsCA != "" {
		if c.tlsCert == "" || c.tlsKey == "" || c.tlsCA == "" {
			return o, usageError("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca go together")
		}
		if o.TLS, err = cluster.LoadTLS(c.tlsCert, c.tlsKey, c.tlsCA); err != nil {
			return o, usageError("%v", err)
		}
	} else if !listenIsLoopback(c.addr) {
		return o, usageError("--cluster-addr %s is not a loopback address: it requires --cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca (mutual TLS between members, docs/cluster.md)", c.addr)
	}
	switch c.membership {
	case "peers":
		if c.providerPort <= 0 || c.providerPort > 65535 {
			return o, usageError("--cluster-membership-port is required with --cluster")
		}
		if len(c.peers) == 0 {
			return o, usageError("--cluster-peers is required with --cluster (every member's membership endpoint, this one included)")
		}
	case "etcd":
		if len(c.peers) > 0 || c.providerPort != 0 {
			return o, usageError("--cluster-membership etcd takes no --cluster-peers or --cluster-membership-port")
		}
	default:
		return o, usageError("--cluster-membership %q: want peers or etcd", c.membership)
	}
	labels := map[string]string{}
	for _, l := range c.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return o, usageError("--cluster-label %q: want KEY=VALUE", l)
		}
		labels[k] = v
	}
	return cluster.Options{Name: c.name, Host: host, Port: p, ProviderPort: c.providerPort, Peers: c.peers, Labels: labels, Refresh: c.refresh, TLS: o.TLS}, nil
}

// superviseCluster is `supervise --cluster`: the process joins the
// cluster, sets the config's servers (every member loads the same file),
// and its gateway serves the cluster-wide pool. Reload (SIGHUP, --watch)
// sets the re-read servers; shutdown drains the gateway, hands the
// member's servers over (leave) and closes.
func (a *superviseCmd) superviseCluster(ctx context.Context, f superviseFlags, listenSet bool) error {
	copts, err := f.cluster.options()
	if err != nil {
		return err
	}
	if f.cluster.membership == "etcd" {
		ec, err := a.etcd.config()
		if err != nil {
			return usageError("--cluster-membership etcd: %v", err)
		}
		copts.Etcd, copts.EtcdPrefix = &ec, a.etcd.prefix+"/cluster"
	}
	setup, err := a.gatewaySetup(f, listenSet)
	if err != nil {
		return err
	}
	if f.mgmtTools {
		return usageError("--management-tools is not supported with --cluster")
	}
	sigs, hups, stopSignals := shutdownSignals()
	defer stopSignals()

	cfg, err := a.configs.load()
	if err != nil {
		a.configs.logError(err)
		return failed(nil)
	}
	oo, err := a.tokens.oauthOptions(ctx)
	if err != nil {
		a.log.Error().Err(err).Msg("opening the OAuth token store")
		return failed(nil)
	}
	a.warnTokenStore(cfg)
	var ln net.Listener
	if setup.serveHTTP {
		if ln, err = net.Listen("tcp", f.listen); err != nil {
			a.log.Error().Err(err).Str("listen", f.listen).Msg("cannot listen")
			return failed(nil)
		}
		setup.listenAddr = ln.Addr().String()
	}
	copts.Supervisor = mcpvisor.Options{Logger: a.libLog, OAuth: oo, Permissions: cfg.Permissions}
	copts.Supervisor.Sandbox.RuntimeDir = os.Getenv("XDG_RUNTIME_DIR")
	// Per-user servers' authorization pages are this member's gateway's
	// (behind a balancer every member has the same public URL, and any
	// member's pages find a flow whichever member holds it).
	setup.auth.userAuthorization(setup.listenAddr)(&copts.Supervisor)
	applyEnvOptions(&copts.Supervisor, os.Getenv)
	copts.OnMemberEvent = func(e cluster.MemberEvent) {
		a.log.Info().Str("event", string(e.Type)).Str("server", e.Server).Str("member", e.Member).Time("at", e.Time).Msg("cluster member")
	}
	member, err := cluster.Start(ctx, copts)
	if err != nil {
		a.log.Error().Err(err).Msg("joining the cluster")
		if ln != nil {
			ln.Close()
		}
		return failed(nil)
	}
	a.log.Info().Str("member", member.ID()).Str("addr", f.cluster.addr).Strs("peers", copts.Peers).Msg("cluster member started")
	waitLogged := a.startEventLog(member.Subscribe(context.Background(), mcpvisor.BufferSize(1024)))
	gopts := a.gatewayOptions(f, setup)
	// Every member writes its own trail; each line names the member.
	if trail, err := f.audit.open(a.app, member.ID()); err != nil {
		if ln != nil {
			ln.Close()
		}
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		_ = member.Close(cctx)
		cancel()
		waitLogged()
		return failed(nil)
	} else if trail != nil {
		gopts.Audit = trail
		defer a.closeAudit(trail)
	}
	gw := gateway.New(member, gopts)
	gw.SetSkipped(cfg.Skipped)
	gw.SetExcluded(cfg.Excluded)
	serving := a.serveGateway(gw)
	if err := member.SetServers(cfg.Servers); err != nil {
		a.log.Error().Err(err).Msg("some servers cannot be placed")
	}
	a.log.Info().Strs("files", cfg.Files).Int("servers", len(cfg.Servers)).Msg("supervising (cluster)")
	serving.serveHTTP(ln)
	if ln != nil {
		url := "http://" + ln.Addr().String()
		a.log.Info().Str("mcp", url+gateway.MCPPath).Str("status", url+"/status").Str("events", url+"/events").
			Bool("token", setup.token != "").Msg("gateway listening")
	}
	if f.stdio {
		serving.serveStdio()
	}
	var watchC <-chan struct{}
	if f.watch {
		watchC = a.watchConfig(serving.ctx, cfg, f.watchEvery)
	}
	reload := func(why string) {
		cfg, err := a.configs.load()
		if err != nil {
			a.configs.logError(err)
			a.log.Error().Str("trigger", why).Msg("config reload failed: keeping the running config")
			return
		}
		if policy, err := a.configs.loadAccess(a.accessFile); err != nil {
			a.log.Error().Err(err).Str("trigger", why).Msg("config reload: the access rules stay as they were")
		} else {
			gw.SetAccess(policy)
		}
		gw.SetSkipped(cfg.Skipped)
		gw.SetExcluded(cfg.Excluded)
		a.warnTokenStore(cfg)
		if err := member.SetServers(cfg.Servers); err != nil {
			a.log.Error().Err(err).Msg("some servers cannot be placed")
		}
		a.log.Info().Str("trigger", why).Int("servers", len(cfg.Servers)).Msg("config reloaded (cluster)")
	}
	var why string
	fenced := false
loop:
	for {
		select {
		case <-sigs:
			why = "signal"
			break loop
		case <-serving.stdinDone:
			why = "stdin closed"
			break loop
		case <-ctx.Done():
			why = "context ended"
			break loop
		case <-member.Fenced():
			why = "the cluster removed this member (it was cut off); restart it to rejoin"
			fenced = true
			break loop
		case <-hups:
			reload("SIGHUP")
		case <-watchC:
			reload("config file changed")
		}
	}
	signal.Stop(sigs)
	a.log.Info().Str("reason", why).Stringer("grace", f.grace).Msg("shutting down: draining the gateway, handing the servers over")
	dctx, cancel := context.WithTimeout(context.Background(), f.grace)
	drained := gw.Drain(dctx)
	leaveErr := member.Leave(dctx)
	cancel()
	serving.stop()
	cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	closeErr := member.Close(cctx)
	cancel()
	waitLogged()
	if fenced {
		a.log.Error().Msg("stopped: this member was removed from the cluster")
		return failed(nil)
	}
	if closeErr != nil || leaveErr != nil || !drained {
		a.log.Error().Bool("drained", drained).AnErr("leave", leaveErr).AnErr("close", closeErr).Msg("stopped, not cleanly")
		return failed(nil)
	}
	a.log.Info().Msg("stopped")
	return nil
}

// warnTokenStore warns when a cluster member keeps OAuth tokens in a
// per-machine store while servers may use OAuth: a server that moves to
// another member would find no token there (use --token-store etcd).
func (a *superviseCmd) warnTokenStore(cfg *config.Config) {
	if a.tokens.info.Backend == backendEtcd {
		return
	}
	var remote []string
	for name, sc := range cfg.Servers {
		if sc.URL != "" && !sc.Disabled {
			remote = append(remote, name)
		}
	}
	if len(remote) == 0 {
		return
	}
	a.log.Warn().Str("token_store", a.tokens.info.String()).Int("remote_servers", len(remote)).
		Msg(fmt.Sprintf("cluster mode with a per-machine OAuth token store: a remote server that moves to another member loses its tokens; use --token-store etcd (%d remote servers)", len(remote)))
}
