package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

var client = &http.Client{Timeout: testwait.Patience}

// serve runs a gateway over sup, with a dashboard of options dopts as
// its one Part, behind an httptest server.
func serve(t testing.TB, sup gateway.Backend, opts gateway.Options, dopts dashboard.Options) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	opts.Parts = append(opts.Parts, dashboard.New(dopts))
	g := gateway.New(sup, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, 5*time.Millisecond)
	}()
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	return g, srv
}
