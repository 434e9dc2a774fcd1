// Command clustermember runs one cluster member for the multi-process
// tests of package cluster: it joins the cluster, configures
// -servers virtual servers of a mock at -mock (<mock>/<name> for s00…),
// prints its events as JSON lines on stdout, and serves a small control
// API on -control:
//
//	POST /call?server=s01  call the server's echo tool (5 s deadline);
//	                       answers {"ok":…,"class":…,"error":…}
//	GET  /overview         the cluster-wide status: {"servers":{name: member},…}
//	POST /leave            leave gracefully, close, and exit 0
//	POST /load             a bounded call load from inside the member
//	                       (load.go; used by bench/cluster)
//	GET  /memstats         Go heap figures and goroutines after a GC
//	GET  /debug/pprof/     net/http/pprof's profiles (heap, goroutine, …,
//	                       and profile: CPU)
//
// With -serve-mock it runs the mock those members reach instead (mock.go).
//
// It is a test harness, not part of mcpvisor.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster"
	"github.com/mcpvisor/mcpvisor/transports"
)

func main() {
	port := flag.Int("port", 0, "remote port")
	providerPort := flag.Int("provider-port", 0, "membership endpoint port")
	peers := flag.String("peers", "", "membership endpoints, comma separated")
	mock := flag.String("mock", "", "mock server URL (…/mcp)")
	servers := flag.Int("servers", 30, "number of virtual servers")
	control := flag.String("control", "127.0.0.1:0", "control API address")
	logInfo := flag.Bool("log", false, "log at info level on stderr")
	labels := flag.String("labels", "", "this member's labels: k=v,k2=v2")
	pins := flag.String("pin", "", "servers pinned by label: name:k=v,name2:k=v")
	tlsCert := flag.String("tls-cert", "", "with -tls-key and -tls-ca: the member's certificate (PEM); mutual TLS on both endpoints")
	tlsKey := flag.String("tls-key", "", "the member's key (PEM)")
	tlsCA := flag.String("tls-ca", "", "the CA that signs the members' certificates (PEM)")
	membershipPoll := flag.Duration("membership-poll", 0, "how often this member polls the others' membership endpoints (0: the default)")
	onlyMock := flag.Bool("serve-mock", false, "serve the mock on a free loopback port instead of joining a cluster (mock.go)")
	flag.Parse()

	var outMu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	print := func(v any) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = enc.Encode(v)
	}
	if *onlyMock {
		serveMock(print)
		return
	}
	logger := zerolog.Nop()
	if *logInfo {
		logger = zerolog.New(os.Stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	var tlsConfig *tls.Config
	if *tlsCert != "" || *tlsKey != "" || *tlsCA != "" {
		var err error
		if tlsConfig, err = cluster.LoadTLS(*tlsCert, *tlsKey, *tlsCA); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	m, err := cluster.Start(context.Background(), cluster.Options{
		TLS:        tlsConfig,
		Labels:     pairs(*labels),
		Supervisor: mcpvisor.Options{Logger: logger},
		Port:       *port, ProviderPort: *providerPort, Peers: strings.Split(*peers, ","),
		MembershipPoll: *membershipPoll,
		OnMemberEvent:  func(ev cluster.MemberEvent) { print(ev) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := map[string]mcpvisor.ServerConfig{}
	for i := range *servers {
		name := fmt.Sprintf("s%02d", i)
		cfg[name] = mcpvisor.ServerConfig{Config: transports.Config{Type: transports.TypeHTTP, URL: *mock + "/" + name}}
	}
	for _, pin := range strings.Split(*pins, ",") {
		if name, label, ok := strings.Cut(pin, ":"); ok {
			s := cfg[name]
			s.Nodes = pairs(label)
			cfg[name] = s
		}
	}
	ln, err := net.Listen("tcp", *control)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	left := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		res, err := m.CallServerTool(ctx, r.URL.Query().Get("server"), "echo", json.RawMessage(`{"text":"hi"}`))
		out := map[string]any{"ok": err == nil && res != nil && !res.IsError}
		if err != nil {
			out["class"] = classify(err)
			out["error"] = err.Error()
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /overview", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		ov, err := m.Overview(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		servers := map[string]string{}
		for _, st := range ov.Servers {
			servers[st.Name] = st.Member
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"servers": servers, "tools": len(ov.Tools), "unreachable": ov.Unreachable})
	})
	mux.HandleFunc("POST /load", serveLoad(m))
	mux.HandleFunc("GET /memstats", serveMemStats)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("POST /leave", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := m.Leave(ctx)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": err == nil})
		close(left)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	print(map[string]any{"type": "started", "member": m.ID(), "control": ln.Addr().String(), "time": time.Now()})
	if err := m.SetServers(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	<-left
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = m.Close(ctx)
	print(map[string]any{"type": "closed", "member": m.ID(), "time": time.Now()})
	_ = srv.Shutdown(ctx)
}

// pairs parses k=v,k2=v2.
func pairs(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// classify names the typed error a call failed with ("untyped" if none).
func classify(err error) string {
	var lost *mcpvisor.ConnectionLostError
	switch {
	case errors.Is(err, cluster.ErrNoOwner):
		return "no-owner"
	case errors.Is(err, mcpvisor.ErrServerNotReady):
		return "not-ready"
	case errors.As(err, &lost):
		return "connection-lost"
	case errors.Is(err, mcpvisor.ErrUnknownTool):
		return "unknown-tool"
	case errors.Is(err, cluster.ErrDraining):
		return "draining"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	default:
		return "untyped"
	}
}
