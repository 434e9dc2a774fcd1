package cluster

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/labstack/echo"
)

// loopbackProvider builds protoactor's automanaged membership provider so
// that its health endpoint listens where the caller says (127.0.0.1 in
// tests and the local demo), never on 0.0.0.0, and writes nothing to
// stdout.
//
// Hazards worked around (notes/protoactor.md §6): automanaged starts its
// own echo server on "0.0.0.0:<port>", and echo prints "http server
// started on …" to stdout unless told not to. Given an echo instance
// (the provider's testing constructor), automanaged serves that one
// instead; an echo whose Listener is already set serves on it. The
// /_health answer is the provider's own NodeModel, built from the same
// fields automanaged would use.
type loopbackProvider struct {
	*automanaged.AutoManagedProvider
	web      *echo.Echo
	listener net.Listener
	refresh  time.Duration // the poll period (Options.RefreshTTL)
}

// newLoopbackProvider listens on host:port and returns the provider;
// node is called on each health request for the member's NodeModel.
func newLoopbackProvider(o Options, node func() *automanaged.NodeModel) (*loopbackProvider, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.ProviderPort)))
	if err != nil {
		return nil, fmt.Errorf("%w: membership endpoint: %w", ErrStart, err)
	}
	web := echo.New()
	web.HideBanner = true
	web.HidePort = true
	web.Logger.SetOutput(io.Discard)
	web.StdLogger.SetOutput(io.Discard)
	web.Listener = ln
	web.GET("/_health", func(c echo.Context) error { return c.JSON(http.StatusOK, node()) })
	p := automanaged.NewWithTesting(o.RefreshTTL, o.ProviderPort, web, o.Peers...)
	return &loopbackProvider{AutoManagedProvider: p, web: web, listener: ln, refresh: o.RefreshTTL}, nil
}

// stopServing closes the health endpoint, so that the other members see
// this one leave at their next poll.
func (p *loopbackProvider) stopServing() {
	_ = p.web.Close()
	_ = p.listener.Close()
}
