package reaper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/confine"
)

// Timeouts of the host's side.
const (
	// helloTimeout bounds the reaper's start.
	helloTimeout = 10 * time.Second
	// stopTimeout bounds the reaper's final sweep and exit.
	stopTimeout = 10 * time.Second
)

// Request describes a server to start.
type Request struct {
	Path string   // the executable: absolute, or relative to Dir
	Argv []string // argv[0] first
	Env  []string // the whole environment, NAME=value
	Dir  string   // the working directory; "" is the host's

	// Stdin, Stdout and Stderr are the server's ends of its pipes. Spawn
	// passes them to the reaper; the caller closes its copies after.
	Stdin, Stdout, Stderr *os.File

	// Confine, when not nil, runs the server through the exec stage,
	// which applies the plan before the server's first instruction.
	Confine *sandbox.Plan
}

// Process is a server the reaper started.
//
// Concurrency: every method may be called from any goroutine. Done is
// closed once, by the helper's reader goroutine (finish); Status is
// valid after it. mu guards afterExit and orders AfterExit with finish.
type Process struct {
	pid    int
	cgroup bool
	h      *helper
	done   chan struct{}
	status syscall.WaitStatus // set before done is closed
	err    error              // set before done is closed: the helper died
	once   sync.Once          // the hold is dropped once

	mu        sync.Mutex
	afterExit []func() // run by finish; nil once it ran
	finished  bool
}

// Pid returns the server's process id (and process group id).
func (p *Process) Pid() int { return p.pid }

// Cgroup reports whether the server runs in a cgroup of its own.
func (p *Process) Cgroup() bool { return p.cgroup }

// Done is closed when the server process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// AfterExit arranges for f to be called once the server has exited
// (Status is valid then), or at once, in the caller's goroutine, if it
// already has. A host need not hold a goroutine per server blocked on
// Done to learn of its exit: the helper's exit notice calls f. f runs
// on the goroutine that reads the helper's messages and must return
// quickly (start a goroutine for any waiting).
func (p *Process) AfterExit(f func()) {
	p.mu.Lock()
	if !p.finished {
		p.afterExit = append(p.afterExit, f)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	f()
}

// finish records the exit (status or err set by the caller): Done is
// closed and the AfterExit functions run.
func (p *Process) finish() {
	p.mu.Lock()
	close(p.done)
	p.finished = true
	fs := p.afterExit
	p.afterExit = nil
	p.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Status returns how the server exited, once Done is closed. err is
// ErrHelperDied when the reaper died first (the server was killed with
// it, and its status is unknown).
func (p *Process) Status() (status syscall.WaitStatus, err error) { return p.status, p.err }

// Signal sends sig to the server's whole tree: its process group, its
// cgroup, and every descendant it has or had (found through /proc); sig
// 0 sends nothing but notes its descendants, so that Release finds them
// even after they lose their parent. It returns when the signals are
// sent.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	_, err := p.h.call(ctx, &message{Op: opSignal, Pid: p.pid, Signal: int(sig)})
	return err
}

// Release ends what is left of the server's tree once the server has
// exited (SIGTERM, up to grace, SIGKILL) and removes its cgroup. It
// returns how many processes were still alive. Whatever happens, the
// process no longer holds the reaper: when nothing else does, it stops,
// and its stop kills whatever is left below it.
func (p *Process) Release(ctx context.Context, grace time.Duration) (left int, err error) {
	defer p.once.Do(unhold)
	select {
	case <-p.done:
	default:
		return 0, errors.New("reaper: Release before the process exited")
	}
	if p.err != nil {
		return 0, nil // the reaper is gone, and everything below it
	}
	m, err := p.h.call(ctx, &message{Op: opRelease, Pid: p.pid, GraceMs: grace.Milliseconds()})
	if err != nil {
		return 0, err
	}
	return m.Count, nil
}

// global is the process's reaper: started with the first server, stopped
// when nothing holds it.
var global struct {
	mu    sync.Mutex
	h     *helper // nil: none running
	holds int     // Hold calls not released, plus processes not released
}

// Hold keeps the reaper, once started, running until release is called
// (a supervisor holds it for its lifetime, so that its servers' restarts
// do not each start a new one). Release may be called once.
func Hold() (release func()) {
	global.mu.Lock()
	global.holds++
	global.mu.Unlock()
	var once sync.Once
	return func() { once.Do(unhold) }
}

// unhold drops one hold; the last one stops the reaper, which kills
// whatever is left below it.
func unhold() {
	global.mu.Lock()
	global.holds--
	var stop *helper
	if global.holds == 0 && global.h != nil {
		stop, global.h = global.h, nil
	}
	global.mu.Unlock()
	if stop != nil {
		stop.stop()
	}
}

// Spawn starts a server through the reaper, starting the reaper first if
// none runs. It returns when the server runs (for a confined one: once
// it is confined and executes the server), or with the reason it could
// not be started: an error matching sandbox.ErrUnavailable when its
// sandbox could not be had, an *os.PathError wrapping the errno when it
// could not be executed, ErrNotInstalled when HelperMain has not run.
func Spawn(ctx context.Context, req Request) (*Process, error) {
	if !installed.Load() {
		return nil, ErrNotInstalled
	}
	var confine json.RawMessage
	if req.Confine != nil {
		b, err := json.Marshal(req.Confine)
		if err != nil {
			return nil, err
		}
		confine = b
	}
	global.mu.Lock()
	global.holds++ // the process's, dropped by Release (or below)
	h := global.h
	if h == nil || h.isDead() {
		var err error
		if h, err = startHelper(ctx); err != nil {
			global.holds--
			global.mu.Unlock()
			return nil, err
		}
		global.h = h
	}
	global.mu.Unlock()
	p, err := h.spawn(ctx, req, confine)
	if err != nil {
		unhold()
		return nil, err
	}
	return p, nil
}

// helper is the host's side of one reaper process.
//
// Concurrency: the reader goroutine alone reads the socket; requests may
// be sent from any goroutine; mu guards the tables.
type helper struct {
	cmd     *exec.Cmd
	conn    *packetConn
	pid     int
	cgroups bool
	stderr  *boundedBuffer
	hello   chan *message // the reaper's first message
	done    chan struct{} // closed when the reader ended

	waitOnce sync.Once
	waited   chan struct{} // closed when the reaper process was reaped

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *message
	procs   map[int]*Process
	dead    error
}

// startHelper starts a reaper: the host binary again, in helper mode.
func startHelper(ctx context.Context) (*helper, error) {
	conn, theirs, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	h := &helper{
		conn:    conn,
		stderr:  &boundedBuffer{max: 4 << 10},
		hello:   make(chan *message, 1),
		done:    make(chan struct{}),
		waited:  make(chan struct{}),
		pending: map[uint64]chan *message{},
		procs:   map[int]*Process{},
	}
	// /proc/self/exe is this very binary, even if the file was replaced
	// since.
	h.cmd = &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{helperArg0, modeReaper},
		ExtraFiles: []*os.File{theirs},
		Stderr:     h.stderr,
		// Its own process group: a terminal's ^C is for the host, which
		// then stops its servers in order.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := h.cmd.Start(); err != nil {
		conn.release()
		theirs.Close()
		return nil, fmt.Errorf("reaper: starting the process helper: %w", err)
	}
	theirs.Close()
	routine.Go("reaper.read", h.read)
	t := time.NewTimer(helloTimeout)
	defer t.Stop()
	select {
	case m := <-h.hello:
		h.pid, h.cgroups = m.Pid, m.Cgroup
		return h, nil
	case <-h.done:
		err = fmt.Errorf("the process helper exited at start (does main call mcpvisor.HelperMain first?): %v", h.deadErr())
	case <-t.C:
		err = fmt.Errorf("the process helper did not answer within %v (does main call mcpvisor.HelperMain first?)", helloTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	h.kill()
	if out := h.stderr.String(); out != "" {
		err = fmt.Errorf("%w; its stderr: %s", err, out)
	}
	return nil, fmt.Errorf("reaper: %w", err)
}

// read dispatches the reaper's messages until its socket closes.
func (h *helper) read() {
	defer close(h.done)
	buf, oob := make([]byte, 64<<10), make([]byte, syscall.CmsgSpace(8*4))
	for {
		m, files, err := h.conn.recv(buf, oob)
		closeFiles(files)
		if err != nil {
			h.conn.release()
			h.die(err)
			// The reaper closes its socket when it exits; on any other
			// error it is of no more use.
			h.cmd.Process.Kill()
			h.startWait()
			return
		}
		switch m.Op {
		case opHello:
			h.hello <- m
		case opExited:
			h.mu.Lock()
			p := h.procs[m.Pid]
			delete(h.procs, m.Pid)
			h.mu.Unlock()
			if p != nil {
				p.status = syscall.WaitStatus(m.Status)
				p.finish()
			}
		case opStarted:
			// Registered here, before the next message is read, so that
			// its exit cannot come first.
			p := &Process{pid: m.Pid, cgroup: m.Cgroup, h: h, done: make(chan struct{})}
			h.mu.Lock()
			h.procs[m.Pid] = p
			ch := h.pending[m.ID]
			delete(h.pending, m.ID)
			h.mu.Unlock()
			if ch != nil {
				ch <- &message{Op: opStarted, Pid: m.Pid, proc: p}
			} else {
				go h.abandon(p) // its caller gave up waiting
			}
		default:
			h.mu.Lock()
			ch := h.pending[m.ID]
			delete(h.pending, m.ID)
			h.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
}

// die marks the helper dead: waiting requests fail, and its processes
// are reported gone (the kernel killed them with it).
func (h *helper) die(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.Is(err, errEOF) {
		err = ErrHelperDied
	} else {
		err = fmt.Errorf("%w: %v", ErrHelperDied, err)
	}
	h.dead = err
	for id, ch := range h.pending {
		close(ch)
		delete(h.pending, id)
	}
	for pid, p := range h.procs {
		p.err = err
		p.finish()
		delete(h.procs, pid)
	}
}

func (h *helper) isDead() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dead != nil
}

func (h *helper) deadErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dead
}

// call sends a request and waits for its answer.
func (h *helper) call(ctx context.Context, m *message, fds ...int) (*message, error) {
	ch := make(chan *message, 1)
	h.mu.Lock()
	if h.dead != nil {
		h.mu.Unlock()
		return nil, h.dead
	}
	h.nextID++
	m.ID = h.nextID
	h.pending[m.ID] = ch
	h.mu.Unlock()
	if err := h.conn.send(m, fds...); err != nil {
		h.mu.Lock()
		delete(h.pending, m.ID)
		h.mu.Unlock()
		return nil, fmt.Errorf("reaper: %w", err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, h.deadErr()
		}
		if err := ctx.Err(); err != nil {
			// The caller gave up too (select picks either of two ready
			// cases): it is answered as below, whichever came first.
			if r.proc != nil {
				go h.abandon(r.proc)
			}
			return nil, err
		}
		return r, nil
	case <-ctx.Done():
		// The answer is dropped when it comes; a server it started is
		// abandoned (the reader does so when nobody waits any more).
		h.mu.Lock()
		_, waiting := h.pending[m.ID]
		delete(h.pending, m.ID)
		h.mu.Unlock()
		if !waiting { // the reader took the answer meanwhile
			if r, ok := <-ch; ok && r.proc != nil {
				go h.abandon(r.proc)
			}
		}
		return nil, ctx.Err()
	}
}

// abandon ends a server whose start was answered after its caller gave
// up: nothing will ever use it. (Its hold was dropped with the caller's
// error; if it was the last, the reaper's stop ends the server anyway.)
func (h *helper) abandon(p *Process) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_, _ = h.call(ctx, &message{Op: opSignal, Pid: p.pid, Signal: int(syscall.SIGKILL)})
	select {
	case <-p.done:
	case <-ctx.Done():
		return
	}
	if p.err == nil {
		_, _ = h.call(ctx, &message{Op: opRelease, Pid: p.pid})
	}
}

// spawn sends a spawn request with the server's descriptors.
func (h *helper) spawn(ctx context.Context, req Request, confine json.RawMessage) (*Process, error) {
	m := &message{Op: opSpawn, Path: req.Path, Argv: req.Argv, Env: req.Env, Dir: req.Dir, Confine: confine}
	fds := []int{int(req.Stdin.Fd()), int(req.Stdout.Fd()), int(req.Stderr.Fd())}
	// When ctx ends first, the server, if it starts, is ended (abandon).
	r, err := h.call(ctx, m, fds...)
	if err != nil {
		return nil, err
	}
	if r.Op == opStarted {
		return r.proc, nil
	}
	return nil, startError(req, r)
}

// startError turns a failed spawn's answer into a typed error.
func startError(req Request, r *message) error {
	if r.Kind == confine.KindSandbox && req.Confine != nil {
		return &sandbox.UnavailableError{Requested: req.Confine.Mechanism, Reasons: []string{r.Err}}
	}
	if r.Errno != 0 {
		return &os.PathError{Op: "exec", Path: req.Path, Err: syscall.Errno(r.Errno)}
	}
	return fmt.Errorf("reaper: starting %s: %s", req.Path, r.Err)
}

// stop ends the reaper: it sees end-of-file, kills whatever is left below
// it and exits. stop returns when it has exited.
func (h *helper) stop() {
	h.conn.shutdown(true)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-h.waited:
	case <-t.C:
		h.cmd.Process.Kill()
		<-h.done
		<-h.waited
	}
}

// kill ends a reaper that failed to start.
func (h *helper) kill() {
	h.cmd.Process.Kill()
	h.conn.shutdown(false)
	<-h.done
	<-h.waited
}

// startWait reaps the reaper process (once), which has exited or been
// killed; h.waited is closed when it is.
func (h *helper) startWait() {
	h.waitOnce.Do(func() {
		go func() {
			h.cmd.Wait()
			close(h.waited)
		}()
	})
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.TrimSpace(w.b.Bytes()))
}
