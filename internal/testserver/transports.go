package testserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/mcpvisor/mcpvisor/transports"
)

// EnvRole marks a process started by Command to act as a test server;
// Main checks it.
const EnvRole = "MCPVISOR_TESTSERVER"

// Command returns the transport config that runs a test server over stdio
// by re-executing the current test binary, whose TestMain must call Main
// first thing.
func Command() transports.Config {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	// A race-enabled binary sleeps 1 s at exit by default.
	return transports.Config{Command: exe, Env: map[string]string{EnvRole: "stdio", "GORACE": "atexit_sleep_ms=0"}}
}

// Main serves a test server over stdin and stdout and exits when the
// process was started by Command; otherwise it returns at once. Call it
// first thing in TestMain.
func Main() {
	if os.Getenv(EnvRole) == "" {
		return
	}
	s := New(Options{})
	err := s.srv.ServeStdio(context.Background(), os.Stdin, os.Stdout)
	s.Close()
	if err != nil {
		os.Stderr.WriteString("testserver: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// Handler returns the Streamable HTTP handler of s (serve it at any path).
func (s *Server) Handler() http.Handler { return s.srv.HTTPHandler() }

// Serve starts a test server with options o over Streamable HTTP on
// 127.0.0.1 and returns it and its endpoint's URL; both end when the test
// does.
func Serve(t testing.TB, o Options) (*Server, string) {
	t.Helper()
	s := New(o)
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		s.srv.Shutdown()
		hs.Close()
		s.Close()
	})
	return s, hs.URL + "/mcp"
}
