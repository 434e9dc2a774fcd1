// Package stdio runs an MCP server as a subprocess and exchanges
// newline-delimited JSON-RPC frames with it over stdin and stdout.
//
// The server runs in a process tree of its own, so that shutting it down
// also ends whatever it spawned. On Linux it is started by the process
// helper (package reaper): nothing it starts outlives the host, not even
// when the host is killed with SIGKILL, and a server whose config asks
// for a sandbox is confined before its first instruction (package
// sandbox). On other Unix systems it runs in a process group of its own;
// on Windows in a Job Object with kill-on-close (process_*.go). Its
// stderr is kept in a bounded ring buffer and quoted when it fails.
// Frames are capped in size; an oversize frame is discarded and
// reported, not fatal. Shutdown follows the MCP spec's ladder: close
// stdin, wait, SIGTERM to the server's tree, wait, SIGKILL to the tree
// (on Windows: close stdin, wait, terminate the job).
package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// Options tune a stdio connection. The zero value is usable.
type Options struct {
	// MaxFrameSize caps one frame (without its newline). Zero means
	// transports.DefaultMaxFrameSize (16 MiB).
	MaxFrameSize int64

	// StderrBufferSize is how many of the latest stderr bytes are kept.
	// Zero means 64 KiB.
	StderrBufferSize int

	// CloseStdinTimeout is how long Close waits for the server to exit
	// after its stdin is closed, before SIGTERM. Zero means 2 s.
	CloseStdinTimeout time.Duration

	// TerminateTimeout is how long Close waits after SIGTERM before
	// SIGKILL. Zero means 2 s.
	TerminateTimeout time.Duration

	// Logger receives the server's stderr lines at debug level and the
	// transport's own diagnostics. The zero value logs nothing.
	Logger zerolog.Logger

	// Sandbox holds the host's settings for confined servers (the home
	// directory to hide, mechanisms to avoid).
	Sandbox sandbox.Options
}

func (o *Options) withDefaults() Options {
	out := *o
	if out.MaxFrameSize <= 0 {
		out.MaxFrameSize = transports.DefaultMaxFrameSize
	}
	if out.StderrBufferSize <= 0 {
		out.StderrBufferSize = 64 << 10
	}
	if out.CloseStdinTimeout <= 0 {
		out.CloseStdinTimeout = 2 * time.Second
	}
	if out.TerminateTimeout <= 0 {
		out.TerminateTimeout = 2 * time.Second
	}
	return out
}

const (
	// exitDrainTimeout is how long, after the server process exits, the
	// reader may keep draining stdout before it is cut off (a grandchild
	// that inherited stdout would otherwise keep the stream open forever).
	exitDrainTimeout = 250 * time.Millisecond
	// exitStatusTimeout bounds the wait for the exit status of a process
	// the kernel says is exiting (awaitExit): beyond confinedDrainTimeout,
	// which may come first.
	exitStatusTimeout = 2 * confinedDrainTimeout
	// exitPollInterval is how often awaitExit looks again.
	exitPollInterval = 10 * time.Millisecond
	// groupReapTimeout bounds the wait for the rest of the process group
	// after the server itself has exited.
	groupReapTimeout = 500 * time.Millisecond
	// confinedDrainTimeout bounds the wait for a confined server's last
	// stderr after its exit (it ends at once when stderr closes, as it does
	// when nothing of the server's tree holds it): the out-of-memory report
	// that tells a resource-limit death must be read first, however loaded
	// the machine.
	confinedDrainTimeout = 5 * time.Second
	// killWaitTimeout bounds the wait for the exit after SIGKILL.
	killWaitTimeout = 2 * time.Second
	// retainedBufferLimit: write buffers larger than this are not
	// kept for reuse after a big frame.
	retainedBufferLimit = 1 << 20
)

// writeBuffers hold frames being written (*[]byte), shared by every
// connection.
var writeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// ProcessExitError reports that the server process ended.
type ProcessExitError struct {
	ExitCode int    // -1 when killed by a signal
	Signal   string // the signal that killed it, if any
	Stderr   string // the last lines of its stderr

	// ResourceLimit names the sandbox limit the server ran into, when it
	// died of one: "memory" (its stderr says it ran out of memory),
	// "memory or processes" (it could not create a thread or process),
	// "cpu" (SIGXCPU) or "file-size" (SIGXFSZ). Empty otherwise.
	ResourceLimit string
}

func (e *ProcessExitError) Error() string {
	var b strings.Builder
	b.WriteString("server process ")
	if e.Signal != "" {
		fmt.Fprintf(&b, "ended by a signal (%s)", e.Signal)
	} else {
		fmt.Fprintf(&b, "exited with code %d", e.ExitCode)
	}
	if e.ResourceLimit != "" {
		fmt.Fprintf(&b, " at its sandbox's %s limit", e.ResourceLimit)
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, "; stderr: %s", e.Stderr)
	}
	return b.String()
}

// Unwrap makes a process exit match transports.ErrClosed.
func (e *ProcessExitError) Unwrap() error { return transports.ErrClosed }

// Conn is a running stdio server. Its goroutines: the reader (stdout →
// Receiver), started by Dial, and the exit handler (the process's exit →
// exited), started by the exit notice. Its stderr is copied into the
// ring by the process's one stderr poller (stderr_linux.go; elsewhere by
// a goroutine per connection). An idle connection thus holds one
// goroutine, its reader, and three descriptors (stdin, stdout, stderr).
// Close ends them all.
type Conn struct {
	opts Options
	proc process
	pgid int
	recv transports.Receiver

	stdin  *os.File // write end; pollable, so writes honour deadlines
	stdout *os.File // read end; closed by the waiter or Close to unblock the reader
	// stopStderr ends the reading of stderr and closes its read end
	// (Close calls it); the reading closes stderrDone when it ends.
	stopStderr func()
	errlog     *ring
	// secrets are the config's values a server may repeat on stderr
	// (transports.ConfigSecrets), scrubbed from what is kept and logged;
	// read-only after Dial.
	secrets []string

	// stdinRaw is stdin's syscall.RawConn, for Send's first write
	// attempt; nil if the platform has none.
	stdinRaw syscall.RawConn

	// wlock is a one-slot semaphore serialising writers; a channel rather
	// than a mutex so that a writer waiting for it can give up on ctx.
	wlock chan struct{}
	werr  error // guarded by wlock; non-nil once a write failed

	exited  chan struct{} // closed by the waiter after the process exited
	exitErr error         // written by the waiter before exited is closed

	readerDone chan struct{} // closed by the reader after Receiver.Closed
	stderrDone chan struct{} // closed when the reading of stderr ended

	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
	closeDone chan struct{} // closed when the shutdown ladder finished
	closeErr  error         // written by shutdown before closeDone is closed
	closedBy  error         // the cause the reader reports when Close ended it
}

// Dial starts the server described by cfg and returns once the process
// runs. Frames and the connection's end are delivered to recv. ctx bounds
// only the start; the process lives until Close or its own exit.
func Dial(ctx context.Context, cfg transports.Config, opts Options, recv transports.Receiver) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Command == "" {
		return nil, errors.New("stdio: no command")
	}
	if cfg.Cwd != "" {
		if fi, err := os.Stat(cfg.Cwd); err != nil {
			return nil, fmt.Errorf("stdio: working directory: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("stdio: working directory %q is not a directory", cfg.Cwd)
		}
	}
	o := opts.withDefaults()
	c := &Conn{
		opts:       o,
		recv:       recv,
		errlog:     newRing(o.StderrBufferSize),
		secrets:    transports.ConfigSecrets(cfg),
		wlock:      make(chan struct{}, 1),
		exited:     make(chan struct{}),
		readerDone: make(chan struct{}),
		stderrDone: make(chan struct{}),
		closing:    make(chan struct{}),
		closeDone:  make(chan struct{}),
		closedBy:   transports.ErrClosed,
	}

	var childEnds []*os.File
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	stdinW, stdinR, err := pipe(false)
	if err != nil {
		return nil, fmt.Errorf("stdio: %w", err)
	}
	stdoutR, stdoutW, err := pipe(true)
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, fmt.Errorf("stdio: %w", err)
	}
	stderrW, stopStderr, err := c.openStderr()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, fmt.Errorf("stdio: %w", err)
	}
	childEnds = []*os.File{stdinR, stdoutW, stderrW}

	proc, err := startProcess(ctx, startSpec{cfg: cfg, env: serverEnv(cfg.Env, nil), stdin: stdinR, stdout: stdoutW, stderr: stderrW}, o)
	closeAll(childEnds...) // the child has its copies
	if err != nil {
		closeAll(stdinW, stdoutR)
		stopStderr()
		return nil, fmt.Errorf("stdio: starting %q: %w", cfg.Command, err)
	}
	c.proc, c.pgid = proc, proc.pid()
	c.stdin, c.stdout, c.stopStderr = stdinW, stdoutR, stopStderr
	if raw, err := stdinW.SyscallConn(); err == nil {
		c.stdinRaw = raw
	}

	// No goroutine waits for the exit: the exit notice starts one.
	c.proc.afterExit(func() { routine.Go("stdio.exit", c.wait) })
	routine.Go("stdio.read", c.read)
	return c, nil
}

// Pid returns the server's process id, which is also its process group
// id. (For a server confined by bubblewrap, the pid of bwrap.)
func (c *Conn) Pid() int { return c.pgid }

// Sandbox names the mechanism confining the server: landlock, bwrap or
// seatbelt; empty when it runs unconfined.
func (c *Conn) Sandbox() transports.SandboxMechanism { return c.proc.sandbox() }

// StderrTail returns the last lines the server wrote to stderr.
func (c *Conn) StderrTail(maxLines int) string { return c.stderrTail(maxLines) }

// stderrTail is the ring's last lines, scrubbed again as a whole: a
// secret that straddled two reads of stderr is caught here.
func (c *Conn) stderrTail(maxLines int) string {
	return string(transports.Scrub([]byte(c.errlog.Tail(maxLines)), c.secrets))
}

// Send writes frame and a newline to the server's stdin in one write.
func (c *Conn) Send(ctx context.Context, frame []byte) error {
	select {
	case c.wlock <- struct{}{}:
	default:
		select {
		case c.wlock <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("stdio: send: %w", ctx.Err())
		case <-c.closing:
			return transports.ErrClosed
		}
	}
	defer func() { <-c.wlock }()
	if c.werr != nil {
		return c.werr
	}
	// The frame and its newline go in one write, from a buffer of a pool
	// shared by every connection: an idle one holds none.
	bp := writeBuffers.Get().(*[]byte)
	buf := append(append((*bp)[:0], frame...), '\n')
	defer func() {
		if cap(buf) <= retainedBufferLimit {
			*bp = buf[:0]
			writeBuffers.Put(bp)
		}
	}()
	done := 0
	if ctx.Err() == nil {
		done = c.tryWrite(buf)
		if done == len(buf) {
			return nil
		}
	}
	var stop func() bool
	var interrupted chan struct{}
	if ctx.Done() != nil {
		interrupted = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			c.stdin.SetWriteDeadline(time.Unix(1, 0))
			close(interrupted)
		})
	}
	n, err := c.stdin.Write(buf[done:])
	n += done
	if stop != nil && !stop() {
		// The AfterFunc started: wait until its deadline is set before
		// clearing it, or it could land after the clearing and fail the
		// next Send of another call (a write timing out at once).
		<-interrupted
		c.stdin.SetWriteDeadline(time.Time{})
	}
	if err == nil {
		return nil
	}
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("stdio: send: %w", ctx.Err()) // nothing written: the stream is intact
	}
	// A partial frame corrupts the stream, and EPIPE means the server no
	// longer reads: either way this connection cannot carry another frame.
	if errors.Is(err, syscall.EPIPE) {
		if exit := c.exitOf(ctx); exit != nil {
			c.werr = fmt.Errorf("writing to the server's stdin after %d of %d bytes: %v: %w", n, len(buf), err, exit)
			return c.werr
		}
	}
	c.werr = fmt.Errorf("%w: writing to the server's stdin after %d of %d bytes: %v", transports.ErrClosed, n, len(buf), err)
	return c.werr
}

// exitOf waits briefly (exitDrainTimeout, or until ctx ends) for the
// process to exit after a write found its stdin closed, and returns how
// it ended (the *ProcessExitError the reader reports too), or nil while
// it runs on.
//
// Why: a server that exits closes its stdin before the reader has seen
// it exit, and a write in between (a request, or one the session sends
// on its own, such as a re-list) fails with EPIPE first. Without the
// wait, which of the two reported the end decided the error of the calls
// in flight: "broken pipe" about one time in fifty, the exit otherwise.
func (c *Conn) exitOf(ctx context.Context) error {
	if c.awaitExit(ctx) {
		return c.exitErr
	}
	return nil
}

// awaitExit waits for the process's exit status after its stdout ended
// or its stdin broke, and reports whether it came. It waits
// exitDrainTimeout, and then, while the kernel says the process is on
// its way out (exitPending), up to exitStatusTimeout in all: the status
// is sure to come then, but it may take a while on a loaded machine, or
// while a confined server's last stderr is read (confinedDrainTimeout).
// It gives up early when the connection is being closed or ctx ends.
func (c *Conn) awaitExit(ctx context.Context) bool {
	deadline := time.Now().Add(exitStatusTimeout)
	t := time.NewTimer(exitDrainTimeout)
	defer t.Stop()
	for {
		select {
		case <-c.exited:
			return true
		case <-c.closing:
			return false
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if !exitPending(c.pgid) || !time.Now().Before(deadline) {
			return false
		}
		t.Reset(exitPollInterval)
	}
}

// tryWrite makes one write of buf to stdin that does not wait for the
// pipe to have room, and returns how many bytes it wrote (0 on any
// error; the caller's ordinary write then meets the error again and
// reports it).
//
// Why: a frame almost always fits in the pipe at once, and then Send
// need not arm ctx's hook that interrupts a blocked write
// (context.AfterFunc registers with ctx and allocates per call: 3 of the
// 22 allocations per sequential call in bench/peers, CallSequential).
func (c *Conn) tryWrite(buf []byte) int {
	if c.stdinRaw == nil {
		return 0
	}
	return writeOnce(c.stdinRaw, buf)
}

// read delivers stdout frames until the stream ends, then reports Closed.
func (c *Conn) read() {
	defer close(c.readerDone)
	err := transports.ReadLines(c.stdout, int64(c.opts.MaxFrameSize), c.recv)
	c.recv.Closed(c.cause(err))
}

// cause explains why the stdout stream ended.
func (c *Conn) cause(readErr error) error {
	select {
	case <-c.closing:
		return c.closedBy
	default:
	}
	// EOF usually means the process is exiting; wait for its status so
	// the error can say how it ended.
	if c.awaitExit(context.Background()) {
		return c.exitErr
	}
	select {
	case <-c.closing:
		return c.closedBy
	default:
	}
	if readErr == io.EOF {
		return fmt.Errorf("%w: the server closed its stdout but is still running", transports.ErrClosed)
	}
	return fmt.Errorf("%w: reading the server's stdout: %v", transports.ErrClosed, readErr)
}

// wait records the process's exit (it runs once the process exited)
// and, if stdout stays open after it (a grandchild holds it), cuts the
// reader off so Closed is delivered.
func (c *Conn) wait() {
	<-c.proc.done()
	code, sig, err := c.proc.exit()
	pe := &ProcessExitError{ExitCode: code}
	switch {
	case err != nil:
		pe.Signal = "SIGKILL: " + err.Error()
	case sig != 0:
		pe.Signal = sig.String()
	}
	// The stderr drain may still be copying the last words; wait briefly
	// (longer for a confined server: its last words may say which limit
	// it ran into).
	drain := 50 * time.Millisecond
	if c.proc.sandbox() != "" {
		drain = confinedDrainTimeout
	}
	select {
	case <-c.stderrDone:
	case <-time.After(drain):
	}
	pe.Stderr = c.stderrTail(5)
	if c.proc.sandbox() != "" {
		// A runtime's crash report follows its reason (Go prints every
		// goroutine's stack after "fatal error: runtime: out of memory"):
		// look through what the ring holds of the dying words.
		b := c.errlog.Bytes()
		pe.ResourceLimit = resourceLimit(sig, string(b[max(0, len(b)-oomSearchBytes):]))
	}
	c.exitErr = pe
	close(c.exited)

	select {
	case <-c.readerDone:
	case <-time.After(exitDrainTimeout):
		c.stdout.Close()
	}
}

// stderrWrite keeps bytes the server wrote to stderr in the ring and,
// at debug level, logs them line by line (a line split across reads is
// logged in pieces), with the config's secrets scrubbed from both (a
// secret split across two reads is caught again by stderrTail, not in
// the log).
func (c *Conn) stderrWrite(b []byte) {
	b = transports.Scrub(b, c.secrets)
	c.errlog.Write(b)
	e := c.opts.Logger.Debug()
	if !e.Enabled() {
		return
	}
	e.Discard()
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i+1], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			continue
		}
		if len(line) > 1024 {
			line = line[:1024]
		}
		c.opts.Logger.Debug().Bytes("stderr", line).Msg("server stderr")
	}
}

// Close runs the shutdown ladder: close stdin → wait → SIGTERM to the
// process group → wait → SIGKILL to the group, then ends whatever is left
// of the group after the server itself has exited.
func (c *Conn) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		close(c.closing)
		go c.shutdown()
	})
	select {
	case <-c.closeDone:
		return c.closeErr
	case <-ctx.Done():
		return fmt.Errorf("stdio: close of pid %d still in progress: %w", c.pgid, ctx.Err())
	}
}

func (c *Conn) shutdown() {
	defer close(c.closeDone)
	log := c.opts.Logger
	// What the server started is noted before it can exit and orphan it.
	ctx, cancel := context.WithTimeout(context.Background(), killWaitTimeout)
	c.proc.note(ctx)
	cancel()
	c.stdin.Close()
	if !c.waitExit(c.opts.CloseStdinTimeout) {
		log.Debug().Int("pid", c.pgid).Msg("server did not exit after stdin closed; sending SIGTERM to its tree")
		c.signalTree(syscall.SIGTERM)
		if !c.waitExit(c.opts.TerminateTimeout) {
			log.Warn().Int("pid", c.pgid).Msg("server ignored SIGTERM; sending SIGKILL to its tree")
			c.signalTree(syscall.SIGKILL)
			if !c.waitExit(killWaitTimeout) {
				c.closeErr = fmt.Errorf("stdio: pid %d survived SIGKILL for %v", c.pgid, killWaitTimeout)
			}
		}
	}
	// The server is gone (or will not go); anything it left is ended.
	ctx, cancel = context.WithTimeout(context.Background(), groupReapTimeout+2*killWaitTimeout)
	if c.waitExit(0) {
		if err := c.proc.release(ctx, min(groupReapTimeout, c.opts.TerminateTimeout)); err != nil && c.closeErr == nil {
			c.closeErr = fmt.Errorf("stdio: ending what pid %d left: %w", c.pgid, err)
		}
	}
	cancel()
	c.stdout.Close()
	c.stopStderr()
	<-c.readerDone
	if c.closeErr == nil {
		select {
		case <-c.exited:
		default:
			c.closeErr = fmt.Errorf("stdio: pid %d did not exit", c.pgid)
		}
	}
}

func (c *Conn) waitExit(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-c.exited:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// signalTree signals the server and everything it started.
func (c *Conn) signalTree(sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), killWaitTimeout)
	defer cancel()
	c.proc.signal(ctx, sig)
}
