//go:build !linux && !windows

package stdio

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

var lookPath = exec.LookPath

// cmdProcess is a server started directly with os/exec, in a process
// group of its own.
type cmdProcess struct {
	cmd     *exec.Cmd
	plan    *sandbox.Plan
	exited  chan struct{}
	waitErr error
}

func startProcess(ctx context.Context, s startSpec, opts Options) (process, error) {
	path, err := resolveCommand(s.cfg.Command)
	if err != nil {
		return nil, err
	}
	var plan *sandbox.Plan
	env := s.env
	if sb := s.cfg.Sandbox; sb != nil && sb.Enabled {
		plan, err = sandbox.Prepare(sb, sandbox.Command{Path: path, Argv: append([]string{s.cfg.Command}, s.cfg.Args...), Dir: s.cfg.Cwd, Env: s.cfg.Env}, opts.Sandbox)
		if err != nil {
			return nil, err
		}
		path = plan.Path
		env = dedupEnv(append(env, plan.Env...))
	}
	cmd := exec.Command(path)
	if plan != nil {
		cmd.Args = plan.Argv
	} else {
		cmd.Args = append([]string{s.cfg.Command}, s.cfg.Args...)
	}
	cmd.Dir = s.cfg.Cwd
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.stdin, s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		plan.Cleanup()
		return nil, err
	}
	p := &cmdProcess{cmd: cmd, plan: plan, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *cmdProcess) pid() int              { return p.cmd.Process.Pid }
func (p *cmdProcess) done() <-chan struct{} { return p.exited }
func (p *cmdProcess) afterExit(f func())    { afterDone(p.exited, f) }

func (p *cmdProcess) exit() (int, syscall.Signal, error) {
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, ws.Signal(), nil
		}
	}
	return p.cmd.ProcessState.ExitCode(), 0, nil
}

func (p *cmdProcess) note(context.Context) {}

func (p *cmdProcess) signal(_ context.Context, sig syscall.Signal) { _ = syscall.Kill(-p.pid(), sig) }

// release ends whatever is left in the server's process group.
func (p *cmdProcess) release(_ context.Context, grace time.Duration) error {
	defer p.plan.Cleanup()
	alive := func() bool { return syscall.Kill(-p.pid(), 0) == nil }
	if alive() {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for alive() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive() {
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		}
	}
	return nil
}

func (p *cmdProcess) sandbox() transports.SandboxMechanism {
	if p.plan == nil {
		return ""
	}
	return p.plan.Mechanism
}
