package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/confine"
)

// Timeouts of the reaper.
const (
	// execStageTimeout bounds an exec stage's work before it executes the
	// server (reading the plan, Landlock, limits).
	execStageTimeout = 30 * time.Second
	// shutdownTimeout bounds the final sweep when the host is gone.
	shutdownTimeout = 5 * time.Second
	// killWait bounds the wait for processes sent SIGKILL.
	killWait = time.Second
)

// runHelper runs a helper mode and returns its exit code.
func runHelper(mode string, args []string) int {
	switch mode {
	case modeReaper:
		return runReaper()
	}
	fmt.Fprintf(os.Stderr, "%s: unknown mode %q\n", helperArg0, mode)
	return 2
}

// exit ends a helper at once: a race-enabled binary would otherwise wait
// a second in os.Exit.
func exit(code int) { syscall.Exit(code) }

// reaper is the helper process that starts and reaps the host's servers.
//
// Concurrency: requests are served on goroutines of their own; mu guards
// servers and the cgroup counter. Messages to the host are written under
// mu where their order matters (a server's "started" before its
// "exited").
type reaper struct {
	ctl     *packetConn
	self    int
	scan    *scanner
	cgroups *cgroups // nil: no writable cgroup v2 hierarchy

	mu      sync.Mutex
	servers map[int]*child // by pid, from start to release
}

// child is one server the reaper started.
type child struct {
	pid         int
	started     bool // "started" was sent
	failedStart bool // the exec stage failed; the host was told
	exited      bool
	status      syscall.WaitStatus
	cgroup      string        // its cgroup's directory, or ""
	tempDir     string        // its private temporary directory (Landlock), removed by shutdown; or ""
	gone        chan struct{} // closed when it has exited, for the thread that started it; nil unless spawnConfined

	notedMu sync.Mutex
	noted   map[int]uint64 // guarded by notedMu: descendants seen while it ran, pid → start time
}

func runReaper() int {
	ctl, err := inheritedConn(3)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s reaper: not started by mcpvisor: %v\n", helperArg0, err)
		return 2
	}
	// The terminal's signals are for the host: the reaper ends when the
	// host does (or is told to with SIGTERM).
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "%s reaper: prctl(PR_SET_CHILD_SUBREAPER): %v\n", helperArg0, err)
		return 1
	}
	r := &reaper{ctl: ctl, self: os.Getpid(), scan: newScanner(), cgroups: openCgroups(), servers: map[int]*child{}}
	if err := ctl.send(&message{Op: opHello, Pid: r.self, Cgroup: r.cgroups != nil}); err != nil {
		r.shutdown()
		return 1
	}
	eof := make(chan struct{})
	go r.read(eof)
	for {
		select {
		case <-chld:
			r.reap()
		case <-eof:
			r.shutdown()
			return 0
		case <-term:
			r.shutdown()
			return 0
		}
	}
}

// read serves the host's requests until its end of the socket closes.
//
// Every server is forked here, on this goroutine's thread, locked to it
// for as long as the reaper serves: a child's parent-death signal fires
// when the *thread* that forked it ends (golang/go#27505), and a thread of
// the pool can end (a goroutine elsewhere in the host binary that exits
// while locked to it). This one ends only with the reaper. (A server
// confined by Landlock without the exec stage is forked from a thread of
// its own, which lives as long as the server: see spawnConfined.)
func (r *reaper) read(eof chan<- struct{}) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(eof)
	buf, oob := make([]byte, maxMessage), make([]byte, syscall.CmsgSpace(8*4))
	for {
		m, files, err := r.ctl.recv(buf, oob)
		if err != nil {
			closeFiles(files)
			return
		}
		switch m.Op {
		case opSpawn:
			// Forks are serialized anyway (syscall.ForkLock): the reader
			// forks at once, without a goroutine hop; a confined start's
			// wait for its exec stage goes on in a goroutine of its own.
			r.spawn(m, files)
		case opSignal:
			closeFiles(files)
			go r.signal(m)
		case opRelease:
			closeFiles(files)
			go r.release(m)
		default:
			closeFiles(files)
		}
	}
}

// reply sends m to the host; a failure means the host is gone, which the
// read loop learns by itself.
func (r *reaper) reply(m *message) { _ = r.ctl.send(m) }

// spawn starts a server: directly (unconfined, or bubblewrap with prlimit
// inside), from a confined thread of its own (a direct Landlock plan:
// spawnConfined, in a goroutine), or through the exec stage (then the
// rest of the start, waiting for the stage, goes on in a goroutine).
//
// The reaper's copies of the server's stdin, stdout and stderr are closed
// as soon as the fork is done, before the start is reported: a copy still
// open when the host hears of the start would keep the pipes alive after
// the server closed them (a write to a server that closed its stdin would
// succeed into the pipe's buffer instead of failing with EPIPE).
func (r *reaper) spawn(m *message, files []*os.File) {
	if len(files) != 3 {
		closeFiles(files)
		r.fail(m, fmt.Errorf("a spawn request needs 3 descriptors, got %d", len(files)), "")
		return
	}
	fds := []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()}
	path, argv := m.Path, m.Argv
	var plan confine.Plan
	if m.Confine != nil {
		if err := json.Unmarshal(m.Confine, &plan); err != nil {
			closeFiles(files)
			r.fail(m, fmt.Errorf("the sandbox plan: %w", err), confine.KindSandbox)
			return
		}
	}
	var status, statusW *os.File
	switch {
	case plan.Direct && plan.Landlock != nil:
		go r.spawnConfined(m, files, &plan) // it closes files
		return
	case plan.Direct:
		// bubblewrap, with prlimit inside: started like any server;
		// without network, with the socket filter bwrap installs on
		// descriptor confine.BwrapSeccompFD (its argv says so).
		path, argv = plan.Path, plan.Argv
		if plan.NoNetwork {
			fd, err := confine.SocketFilterFile()
			if err != nil {
				closeFiles(files)
				r.fail(m, err, confine.KindSandbox)
				return
			}
			defer unix.Close(fd)
			fds = append(fds, uintptr(fd))
		}
	case m.Confine != nil:
		sr, sw, err := os.Pipe()
		if err != nil {
			closeFiles(files)
			r.fail(m, err, "")
			return
		}
		defer sw.Close()
		status, statusW = sr, sw
		fds = append(fds, sw.Fd())
		path, argv = "/proc/self/exe", []string{helperArg0, modeExec, string(m.Confine)}
	}

	r.mu.Lock()
	pid, cg, err := r.forkExec(path, argv, m, fds)
	closeFiles(files) // the child has its copies
	if err != nil {
		r.mu.Unlock()
		if status != nil {
			status.Close()
		}
		r.fail(m, err, "")
		return
	}
	c := &child{pid: pid, cgroup: cg, tempDir: plan.TempDir}
	r.servers[pid] = c
	if status == nil {
		c.started = true
		r.reply(&message{Op: opStarted, ID: m.ID, Pid: pid, Cgroup: cg != ""})
	}
	r.mu.Unlock()
	if status == nil {
		return
	}
	// Only the child may hold the write end of the status pipe, or the
	// read never ends.
	statusW.Close()
	go r.awaitStage(m, c, status)
}

// fail tells the host that the start m asked for failed.
func (r *reaper) fail(m *message, err error, kind string) {
	out := &message{Op: opFailed, ID: m.ID, Err: err.Error(), Kind: kind}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		out.Errno = int(errno)
	}
	r.reply(out)
}

// spawnConfined starts the server of a direct Landlock plan (prlimit,
// which sets the limits and executes the server) from a thread of its
// own, confined by the plan's ruleset first: the server inherits the
// thread's Landlock domain and no_new_privs, so it never runs
// unconfined, and no exec stage (a start of the host binary) is needed.
// The thread lives until the server has exited: the server's
// parent-death signal fires when the thread that forked it ends
// (golang/go#27505). It owns files.
func (r *reaper) spawnConfined(m *message, files []*os.File, plan *confine.Plan) {
	runtime.LockOSThread() // never unlocked: the confined thread ends with this goroutine
	fds := []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()}
	// The cgroup is made before the thread is confined (its directory
	// is not one the server may write).
	r.mu.Lock()
	cg, cgfd := r.newCgroup()
	r.mu.Unlock()
	if err := confine.Restrict(plan); err != nil {
		closeFiles(files)
		if cg != "" {
			unix.Close(cgfd)
			go removeCgroup(cg, 0) // on another thread: this one may not
		}
		r.fail(m, err, confine.KindSandbox)
		return
	}
	r.mu.Lock()
	pid, cg, err := r.forkInto(plan.Path, plan.Argv, m, fds, cg, cgfd)
	closeFiles(files)
	if err != nil {
		r.mu.Unlock()
		r.fail(m, err, "")
		return
	}
	c := &child{pid: pid, cgroup: cg, started: true, gone: make(chan struct{}), tempDir: plan.TempDir}
	r.servers[pid] = c
	r.reply(&message{Op: opStarted, ID: m.ID, Pid: pid, Cgroup: cg != ""})
	r.mu.Unlock()
	<-c.gone
}

// awaitStage finishes a confined start: the exec stage closes its end of
// the status pipe when it executes the server (close-on-exec), or writes
// why it could not.
func (r *reaper) awaitStage(m *message, c *child, status *os.File) {
	defer status.Close()
	pid := c.pid
	status.SetReadDeadline(time.Now().Add(execStageTimeout))
	var stageErr confine.Report
	data, readErr := readAll(status)
	switch {
	case readErr != nil:
		stageErr = confine.Report{Err: "the exec stage did not finish: " + readErr.Error()}
		syscall.Kill(pid, syscall.SIGKILL)
	case len(data) > 0:
		if json.Unmarshal(data, &stageErr) != nil || stageErr.Err == "" {
			stageErr = confine.Report{Err: "the exec stage failed: " + string(data)}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if stageErr.Err != "" {
		r.reply(&message{Op: opFailed, ID: m.ID, Err: stageErr.Err, Kind: stageErr.Kind, Errno: stageErr.Errno})
		if c.exited {
			r.forget(c)
		} else {
			c.failedStart = true // forgotten when reaped
		}
		return
	}
	c.started = true
	r.reply(&message{Op: opStarted, ID: m.ID, Pid: pid, Cgroup: c.cgroup != ""})
	if c.exited {
		r.reply(&message{Op: opExited, Pid: pid, Status: int(c.status)})
	}
}

// readAll reads f to its end.
func readAll(f *os.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(out) > 64<<10 {
			return out, nil
		}
	}
}

// forkExec starts path in a process group of its own with a parent-death
// signal, born in a new cgroup when there are cgroups. The caller holds
// r.mu (so that the reap loop cannot reap the process before it is
// registered).
func (r *reaper) forkExec(path string, argv []string, m *message, fds []uintptr) (pid int, cgroup string, err error) {
	cg, fd := r.newCgroup()
	return r.forkInto(path, argv, m, fds, cg, fd)
}

// newCgroup makes a new server's cgroup and opens it (fd): "" when there
// are no cgroups, or it could not be made (then cgroups are given up).
// The caller holds r.mu.
func (r *reaper) newCgroup() (cgroup string, fd int) {
	if r.cgroups == nil {
		return "", -1
	}
	cg, fd, err := r.cgroups.create()
	if err != nil {
		r.cgroups = nil // cannot be made here (no permission): give them up
		return "", -1
	}
	return cg, fd
}

// forkInto starts path as forkExec does, born in the cgroup cg (opened
// as fd, which it closes) unless cg is "". The caller holds r.mu.
func (r *reaper) forkInto(path string, argv []string, m *message, fds []uintptr, cg string, fd int) (pid int, cgroup string, err error) {
	attr := &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: fds,
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if cg != "" {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, fd
		pid, err = syscall.ForkExec(path, argv, attr)
		unix.Close(fd)
		if err == nil {
			return pid, cg, nil
		}
		go removeCgroup(cg, 0) // not on this thread, which may be confined
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = false, 0
	}
	pid, err = syscall.ForkExec(path, argv, attr)
	if err == nil && cg != "" {
		// The cgroup could not be entered (no clone3, no permission)
		// but the start works without: give up cgroups.
		r.cgroups = nil
	}
	return pid, "", err
}

// reap collects every child that exited: servers are reported to the
// host; orphans reparented to the reaper are simply reaped.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		c := r.servers[pid]
		if c == nil {
			continue
		}
		c.exited, c.status = true, ws
		if c.gone != nil {
			close(c.gone)
		}
		switch {
		case c.failedStart:
			r.forget(c)
		case c.started:
			r.reply(&message{Op: opExited, Pid: pid, Status: int(ws)})
		}
	}
}

// forget drops a server that is gone; the caller holds r.mu.
func (r *reaper) forget(c *child) {
	delete(r.servers, c.pid)
	if c.cgroup != "" {
		go removeCgroup(c.cgroup, killWait)
	}
}

// lookup returns the server with that pid, or nil.
func (r *reaper) lookup(pid int) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[pid]
}

// signal sends m.Signal to a server's whole tree; signal 0 only notes its
// descendants, so that a later release finds them even after they lose
// their parent.
func (r *reaper) signal(m *message) {
	n := 0
	if c := r.lookup(m.Pid); c != nil {
		n = r.signalTree(c, syscall.Signal(m.Signal))
	}
	r.reply(&message{Op: opSignaled, ID: m.ID, Count: n})
}

// signalTree signals the server's process group, its cgroup, and every
// descendant it has or had (as noted), and notes the descendants it has
// now. It returns how many processes it reached (roughly: a cgroup.kill
// counts one).
func (r *reaper) signalTree(c *child, sig syscall.Signal) int {
	n := 0
	if sig != 0 {
		if syscall.Kill(-c.pid, sig) == nil {
			n++
		}
		if c.cgroup != "" {
			n += max(signalCgroup(c.cgroup, sig), 0)
		}
	}
	if c.cgroup != "" {
		return n // the cgroup holds every descendant
	}
	r.mu.Lock()
	exited := c.exited
	r.mu.Unlock()
	t := r.scan.fresh()
	c.notedMu.Lock()
	defer c.notedMu.Unlock()
	if c.noted == nil {
		c.noted = map[int]uint64{}
	}
	if !exited {
		for _, d := range t.descendants(c.pid) {
			c.noted[d] = t.procs[d].start
		}
	}
	for d, start := range c.noted {
		e, ok := t.procs[d]
		if !ok || e.start != start || e.dead {
			delete(c.noted, d)
			continue
		}
		// A noted process may have children since: they are its tree.
		for _, dd := range t.descendants(d) {
			c.noted[dd] = t.procs[dd].start
			if sig != 0 && syscall.Kill(dd, sig) == nil {
				n++
			}
		}
		if sig != 0 && syscall.Kill(d, sig) == nil {
			n++
		}
	}
	return n
}

// remains reports whether anything of the server's tree is alive: its
// cgroup, its process group, or a noted descendant.
func (r *reaper) remains(c *child) bool {
	if c.cgroup != "" {
		return cgroupPopulated(c.cgroup)
	}
	if syscall.Kill(-c.pid, 0) == nil {
		return true
	}
	c.notedMu.Lock()
	defer c.notedMu.Unlock()
	for d, start := range c.noted {
		if sameProcess(d, start) {
			return true
		}
	}
	return false
}

// release ends what is left of a server that exited: SIGTERM to what
// remains of its tree, up to m.GraceMs for it to go, then SIGKILL; then
// its cgroup is removed and the server forgotten.
func (r *reaper) release(m *message) {
	c := r.lookup(m.Pid)
	if c == nil {
		r.reply(&message{Op: opReleased, ID: m.ID})
		return
	}
	left := 0
	if r.remains(c) {
		left = r.signalTree(c, syscall.SIGTERM)
		if !r.awaitGone(c, time.Duration(m.GraceMs)*time.Millisecond) {
			r.signalTree(c, syscall.SIGKILL)
			r.awaitGone(c, killWait)
		}
	}
	r.mu.Lock()
	delete(r.servers, c.pid)
	r.mu.Unlock()
	if c.cgroup != "" {
		removeCgroup(c.cgroup, killWait)
	}
	r.reply(&message{Op: opReleased, ID: m.ID, Count: left})
}

// awaitGone polls until nothing of the server's tree remains, for up to d.
func (r *reaper) awaitGone(c *child, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for r.remains(c) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// shutdown ends everything below the reaper: the host is gone (or asked
// for it). Every descendant is sent SIGKILL, found through the servers'
// cgroups and groups and by walking /proc, again until the reaper has no
// child left (an orphan is reparented to the reaper, so no child means no
// descendant), or shutdownTimeout passes.
func (r *reaper) shutdown() {
	deadline := time.Now().Add(shutdownTimeout)
	for {
		r.mu.Lock()
		servers := make([]*child, 0, len(r.servers))
		for _, c := range r.servers {
			servers = append(servers, c)
		}
		r.mu.Unlock()
		for _, c := range servers {
			if c.cgroup != "" {
				signalCgroup(c.cgroup, syscall.SIGKILL)
			}
			syscall.Kill(-c.pid, syscall.SIGKILL)
		}
		for _, d := range readProcTable().descendants(r.self) {
			syscall.Kill(d, syscall.SIGKILL)
		}
		if r.reapAll() || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.servers {
		if c.cgroup != "" {
			removeCgroup(c.cgroup, killWait)
		}
		// The host, which removes a server's temporary directory once
		// the server is released, is gone (or closing): the directory
		// would outlive it with whatever the server left there.
		if c.tempDir != "" {
			os.RemoveAll(c.tempDir)
		}
	}
	if r.cgroups != nil {
		removeCgroup(r.cgroups.dir, killWait)
	}
}

// reapAll reaps every child that exited and reports whether none is left.
func (r *reaper) reapAll() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.ECHILD:
			return true
		case err != nil || pid == 0:
			return false
		}
	}
}
