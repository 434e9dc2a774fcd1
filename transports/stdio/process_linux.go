package stdio

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

var lookPath = exec.LookPath

// reapedProcess is a server started by the process helper (package
// reaper): nothing it starts outlives the host, and its exit is reported
// by the helper (no thread or descriptor per server here).
type reapedProcess struct {
	p    *reaper.Process
	plan *sandbox.Plan // nil: not confined
}

// startProcess starts the server through the process helper, confined
// when its config asks for a sandbox.
func startProcess(ctx context.Context, s startSpec, opts Options) (process, error) {
	path, err := resolveCommand(s.cfg.Command)
	if err != nil {
		return nil, err
	}
	dir := s.cfg.Cwd
	if dir == "" {
		// The helper's working directory is the host's when it started;
		// a server starts in the host's current one, as with os/exec.
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	req := reaper.Request{
		Path: path, Argv: append([]string{s.cfg.Command}, s.cfg.Args...), Env: s.env, Dir: dir,
		Stdin: s.stdin, Stdout: s.stdout, Stderr: s.stderr,
	}
	var plan *sandbox.Plan
	if sb := s.cfg.Sandbox; sb != nil && sb.Enabled {
		plan, err = sandbox.Prepare(sb, sandbox.Command{Path: path, Argv: req.Argv, Dir: dir, Env: s.cfg.Env}, opts.Sandbox)
		if err != nil {
			return nil, err
		}
		req.Env = dedupEnv(append(req.Env, plan.Env...))
		req.Confine = plan
	}
	p, err := reaper.Spawn(ctx, req)
	if err != nil {
		plan.Cleanup()
		return nil, err
	}
	return &reapedProcess{p: p, plan: plan}, nil
}

func (r *reapedProcess) pid() int              { return r.p.Pid() }
func (r *reapedProcess) done() <-chan struct{} { return r.p.Done() }
func (r *reapedProcess) afterExit(f func())    { r.p.AfterExit(f) }

func (r *reapedProcess) exit() (int, syscall.Signal, error) {
	ws, err := r.p.Status()
	if err != nil {
		return -1, 0, err
	}
	if ws.Signaled() {
		return -1, ws.Signal(), nil
	}
	return ws.ExitStatus(), 0, nil
}

func (r *reapedProcess) note(ctx context.Context) {
	if !r.p.Cgroup() { // a cgroup needs no notes: it holds every descendant
		_ = r.p.Signal(ctx, 0)
	}
}

func (r *reapedProcess) signal(ctx context.Context, sig syscall.Signal) { _ = r.p.Signal(ctx, sig) }

func (r *reapedProcess) release(ctx context.Context, grace time.Duration) error {
	defer r.plan.Cleanup()
	_, err := r.p.Release(ctx, grace)
	return err
}

func (r *reapedProcess) sandbox() transports.SandboxMechanism {
	if r.plan == nil {
		return ""
	}
	return r.plan.Mechanism
}
