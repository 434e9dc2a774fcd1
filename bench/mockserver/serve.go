package mockserver

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// shutdownTimeout bounds Server.Close: POSTs in flight get this long to
// finish before their connections are closed.
const shutdownTimeout = 2 * time.Second

// Server is a mock server listening on a TCP address; see Serve.
type Server struct {
	// URL is the endpoint: http://host:port/mcp (TransportHTTP),
	// http://host:port/sse (TransportSSE) or ws://host:port/ws
	// (TransportWS).
	URL string

	h         *handler
	srv       *http.Server
	done      chan struct{}
	closeOnce sync.Once
}

// Serve starts a mock server with options o on o.Listen (default
// DefaultListen) and returns once it listens. It serves NewHandler(o)
// until Close is called, ctx ends, or an exit fault fires (then it closes
// every connection at once, as a dying process would, and ExitCode
// reports the code).
func Serve(ctx context.Context, o Options) (*Server, error) {
	h, err := newHandler(o)
	if err != nil {
		return nil, err
	}
	addr := o.Listen
	if addr == "" {
		addr = DefaultListen
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		h:    h,
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	host := ln.Addr().String()
	switch h.transport {
	case TransportHTTP:
		s.URL = "http://" + host + "/mcp"
	case TransportSSE:
		s.URL = "http://" + host + "/sse"
	case TransportWS:
		s.URL = "ws://" + host + "/ws"
	}
	go s.srv.Serve(ln)
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-h.dead:
			s.closeOnce.Do(func() {
				s.srv.Close()
				close(s.done)
			})
		case <-s.done:
		}
	}()
	return s, nil
}

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// ExitCode is the exit code of the exit fault that stopped the server
// (3 for ExitAfter), or 0.
func (s *Server) ExitCode() int {
	select {
	case <-s.h.dead:
		return s.h.code
	default:
		return 0
	}
}

// Close stops the server gracefully and waits, at most shutdownTimeout
// (and then it closes what is left): new requests get 503, standalone and
// legacy SSE streams end, subscriptions/listen streams end with a complete
// result, WebSockets get a going-away close, POSTs in flight finish. It is
// idempotent and safe to call concurrently.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		defer close(s.done)
		s.h.shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if s.srv.Shutdown(ctx) != nil {
			s.srv.Close()
		}
		// WebSockets are hijacked connections: Shutdown does not wait for
		// them.
		conns := make(chan struct{})
		go func() {
			s.h.conns.Wait()
			close(conns)
		}()
		select {
		case <-conns:
		case <-ctx.Done():
		}
	})
	<-s.done
	return nil
}
