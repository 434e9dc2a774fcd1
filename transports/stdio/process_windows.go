//go:build windows

package stdio

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// lookPath is not used on Windows (newCommand looks commands up with the
// server's PATH and PATHEXT); it keeps resolveCommand building.
var lookPath = exec.LookPath

// jobProcess is a server started suspended, put in its Job Object
// (processTree) and then resumed: nothing it starts can leave the job,
// and closing the job's handle ends them all.
type jobProcess struct {
	cmd     *exec.Cmd
	tree    processTree
	exited  chan struct{}
	waitErr error
}

// startProcess starts the server in a job of its own. A sandbox is not
// available on Windows: asking for one fails before anything runs.
func startProcess(_ context.Context, s startSpec, opts Options) (process, error) {
	if sb := s.cfg.Sandbox; sb != nil && sb.Enabled {
		// Prepare says, as a *sandbox.UnavailableError, that no mechanism
		// works here.
		plan, err := sandbox.Prepare(sb, sandbox.Command{Path: s.cfg.Command, Argv: append([]string{s.cfg.Command}, s.cfg.Args...), Dir: s.cfg.Cwd, Env: s.cfg.Env}, opts.Sandbox)
		if err == nil {
			plan.Cleanup()
			err = fmt.Errorf("%w: not supported on windows", sandbox.ErrUnavailable)
		}
		return nil, err
	}
	cmd, err := newCommand(s.cfg, s.env)
	if err != nil {
		return nil, err
	}
	cmd.Dir = s.cfg.Cwd
	cmd.Env = s.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.stdin, s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	tree, err := contain(cmd)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	p := &jobProcess{cmd: cmd, tree: tree, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *jobProcess) pid() int              { return p.cmd.Process.Pid }
func (p *jobProcess) done() <-chan struct{} { return p.exited }
func (p *jobProcess) afterExit(f func())    { afterDone(p.exited, f) }

func (p *jobProcess) exit() (int, syscall.Signal, error) {
	var ee *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &ee) {
		return -1, 0, p.waitErr
	}
	return p.cmd.ProcessState.ExitCode(), 0, nil
}

// note has nothing to do: the job holds every descendant.
func (p *jobProcess) note(context.Context) {}

// signal terminates the job (Windows has no SIGTERM for a console-less
// process: the ladder's gentle step is closing stdin).
func (p *jobProcess) signal(_ context.Context, sig syscall.Signal) { p.tree.signal(sig) }

// release ends what is left in the job, after grace, and closes it.
func (p *jobProcess) release(_ context.Context, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for p.tree.alive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	p.tree.signal(syscall.SIGKILL)
	p.tree.release()
	return nil
}

func (p *jobProcess) sandbox() transports.SandboxMechanism { return "" }
