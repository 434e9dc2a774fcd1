package stdio

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
)

// process is the server's process as the platform starts and ends it.
// On Linux the process helper (package reaper) starts it; elsewhere the
// transport does, in a process group of its own.
//
// Concurrency: done and exit may be called from any goroutine; the
// others are called by the shutdown ladder only.
type process interface {
	// pid is the server's process id (and process group id).
	pid() int
	// done is closed when the process has exited.
	done() <-chan struct{}
	// afterExit calls f once the process has exited (at once if it
	// has). f must return quickly: on Linux it runs on the goroutine that
	// reads the process helper's exit notices, so that no goroutine per
	// server waits for its exit.
	afterExit(f func())
	// exit says how it ended, once done is closed.
	exit() (code int, signal syscall.Signal, err error)
	// note records the server's descendants before a stop begins, so
	// that release finds them even once they have lost their parent.
	note(ctx context.Context)
	// signal sends sig to the server and everything it started.
	signal(ctx context.Context, sig syscall.Signal)
	// release ends what is left of the server's tree once it has exited
	// (SIGTERM, up to grace, SIGKILL) and frees what the start took.
	release(ctx context.Context, grace time.Duration) error
	// sandbox names the mechanism confining the server ("" for none).
	sandbox() transports.SandboxMechanism
}

// startSpec is what Dial hands the platform to start a server.
type startSpec struct {
	cfg                   transports.Config
	env                   []string // the server's environment, without the sandbox's additions
	stdin, stdout, stderr *os.File // the server's ends of its pipes
}

// serverEnv is the host's environment with the config's over it (later
// entries win, and each name appears once: a C program's getenv takes
// the first).
func serverEnv(extra map[string]string, more []string) []string {
	env := os.Environ()
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	env = append(env, more...)
	return dedupEnv(env)
}

// dedupEnv keeps the last entry of each name, in first-seen order.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if last[name] == i {
			out = append(out, kv)
		}
	}
	return out
}

// resolveCommand finds the executable as exec.Command would: a name
// without a slash is looked up in the host's PATH; a path is used as
// given (relative to the working directory).
func resolveCommand(name string) (string, error) {
	if strings.Contains(name, string(filepath.Separator)) {
		return name, nil
	}
	return lookPath(name)
}

// afterDone calls f once done is closed, from a goroutine of its own:
// afterExit where the platform has no exit notice to hook.
func afterDone(done <-chan struct{}, f func()) {
	go func() {
		<-done
		f()
	}()
}
