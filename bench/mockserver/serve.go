package mockserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// shutdownTimeout bounds Server.Close: POSTs in flight get this long to
// finish before their connections are closed.
const shutdownTimeout = 2 * time.Second

// relistenRetry is how often a flapping server that cannot listen again
// on its address at the end of a down period tries again.
const relistenRetry = 50 * time.Millisecond

// Server is a mock server listening on a TCP address; see Serve.
//
// The http.Server of the current up period (srv) is replaced by the
// flapping goroutine (flap) while it runs, and used by Close and the exit
// fault only once it has ended; mu guards it all the same.
type Server struct {
	// URL is the endpoint: http://host:port/mcp (TransportHTTP),
	// http://host:port/sse (TransportSSE) or ws://host:port/ws
	// (TransportWS).
	URL string

	h         *handler
	addr      string        // the address listened on, port resolved: every up period listens there
	done      chan struct{} // closed when the server has stopped
	closeOnce sync.Once
	stop      chan struct{} // closed to end flap
	flapped   chan struct{} // closed when flap has ended (at once without FlapUp)

	mu  sync.Mutex
	srv *http.Server // guarded by mu: the current up period's; nil while down
	ln  net.Listener // guarded by mu: what srv serves on, closed by down and Close themselves
}

// Serve starts a mock server with options o on o.Listen (default
// DefaultListen) and returns once it listens. It serves NewHandler(o)
// until Close is called, ctx ends, or an exit fault fires (then it closes
// every connection at once, as a dying process would, and ExitCode
// reports the code).
//
// With FlapUp it flaps meanwhile: after each FlapUp it closes its
// listener and every connection, forgets its sessions, and after FlapDown
// listens again on the same address and port (retrying every
// relistenRetry should the port be taken meanwhile). Close, the end of
// ctx and the exit fault end the cycle, and Close returns only after it
// has.
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
		h:       h,
		addr:    ln.Addr().String(),
		done:    make(chan struct{}),
		stop:    make(chan struct{}),
		flapped: make(chan struct{}),
	}
	switch h.transport {
	case TransportHTTP:
		s.URL = "http://" + s.addr + "/mcp"
	case TransportSSE:
		s.URL = "http://" + s.addr + "/sse"
	case TransportWS:
		s.URL = "ws://" + s.addr + "/ws"
	}
	s.up(ln)
	if o.FlapUp > 0 {
		go s.flap(o.FlapUp, o.FlapDown)
	} else {
		close(s.flapped)
	}
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-h.s.dead:
			s.closeOnce.Do(func() {
				s.stopFlapping()
				if srv := s.current(); srv != nil {
					srv.Close()
				}
				s.closeListener()
				close(s.done)
			})
		case <-s.done:
		}
	}()
	return s, nil
}

// up serves on ln with a new http.Server.
func (s *Server) up(ln net.Listener) {
	srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go srv.Serve(ln)
}

// down closes the listener and every connection, and makes the handler
// forget what a restarted server would not know.
func (s *Server) down() {
	s.mu.Lock()
	srv, ln := s.srv, s.ln
	s.srv, s.ln = nil, nil
	s.mu.Unlock()
	srv.Close()
	// The http.Server closes the listener only once its Serve goroutine
	// has run; nothing may listen after down returns.
	ln.Close()
	s.h.reset()
}

// current returns the current up period's http.Server, or nil while down.
func (s *Server) current() *http.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// closeListener closes the current up period's listener, if any: an
// http.Server closes it only once its Serve goroutine has run, and a
// stopped server must not listen a moment longer.
func (s *Server) closeListener() {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// flap is the FlapUp cycle: up for up, down for down, until stop is
// closed.
func (s *Server) flap(up, down time.Duration) {
	defer close(s.flapped)
	t := time.NewTimer(up)
	defer t.Stop()
	wait := func(d time.Duration) bool {
		t.Reset(d)
		select {
		case <-t.C:
			return true
		case <-s.stop:
			return false
		}
	}
	select {
	case <-t.C:
	case <-s.stop:
		return
	}
	for {
		s.down()
		if !wait(down) {
			return
		}
		for {
			ln, err := net.Listen("tcp", s.addr)
			if err == nil {
				s.up(ln)
				break
			}
			fmt.Fprintln(os.Stderr, "mockserver: flap: listening again:", err)
			if !wait(relistenRetry) {
				return
			}
		}
		if !wait(up) {
			return
		}
	}
}

// stopFlapping ends flap and waits until it has.
func (s *Server) stopFlapping() {
	close(s.stop)
	<-s.flapped
}

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// ExitCode is the exit code of the exit fault that stopped the server
// (3 for ExitAfter, 5 for CrashMidResponse), or 0.
func (s *Server) ExitCode() int {
	code, _ := s.h.s.exitCode()
	return code
}

// Close stops the server gracefully and waits, at most shutdownTimeout
// (and then it closes what is left): the flapping stops (a server that is
// down stays down), new requests get 503, standalone and legacy SSE
// streams end, subscriptions/listen streams end with a complete result,
// WebSockets get a going-away close, POSTs in flight finish. It is
// idempotent and safe to call concurrently.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		defer close(s.done)
		s.stopFlapping()
		s.h.shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if srv := s.current(); srv != nil && srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		s.closeListener()
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
