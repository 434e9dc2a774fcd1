package stdio

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// stderrPollBuffer is how much one read of a server's stderr takes.
const stderrPollBuffer = 4 << 10

// stderrPoller reads the stderr of every stdio server of the process on
// one goroutine, so that an idle server costs no goroutine of its own
// for its stderr. The descriptors are watched by an epoll instance of
// ours (level-triggered), and that instance is itself watched by the
// runtime's poller: the goroutine sleeps in the poller, not in a system
// call, and holds no thread while every server is quiet. It runs while
// at least one stderr is watched and ends with the last one.
//
// Concurrency: watch and unwatch may be called from any goroutine. mu
// guards every field; the poller goroutine takes it for each batch of
// events, so a stderr is read, and its sink called, only while it is
// watched, and unwatch (which closes its descriptor) never races a read.
type stderrPoller struct {
	mu    sync.Mutex
	ep    *os.File // the epoll instance; nil when no goroutine runs
	subs  map[int32]*stderrSub
	next  int32
	buf   []byte
	evbuf []syscall.EpollEvent
}

// stderrSub is one watched stderr.
type stderrSub struct {
	fd   int
	sink func([]byte) // called with what was read, on the poller goroutine
	done func()       // called once, when the stream ended or was unwatched
}

var stderrs = &stderrPoller{subs: map[int32]*stderrSub{}}

// watch takes fd (non-blocking; once watched it is closed by the
// poller) and calls sink with its bytes until it ends, then done. It
// returns the handle for unwatch. On an error fd is left to the caller.
func (p *stderrPoller) watch(fd int, sink func([]byte), done func()) (int32, error) {
	p.mu.Lock()
	id, err := p.add(fd, sink, done)
	var idle *os.File
	if err != nil && p.ep != nil && len(p.subs) == 0 {
		idle, p.ep = p.ep, nil // a poller started for nothing ends
	}
	p.mu.Unlock()
	if idle != nil {
		idle.Close() // outside mu: the poller goroutine may be waiting for it
	}
	return id, err
}

// add is watch with mu held.
func (p *stderrPoller) add(fd int, sink func([]byte), done func()) (int32, error) {
	if p.ep == nil {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return 0, os.NewSyscallError("epoll_create1", err)
		}
		if err := syscall.SetNonblock(epfd, true); err != nil {
			syscall.Close(epfd)
			return 0, os.NewSyscallError("setnonblock", err)
		}
		ep := os.NewFile(uintptr(epfd), "stderr-epoll")
		// A file the runtime could not add to its poller takes no
		// deadline: then this poller cannot sleep in it.
		if err := ep.SetReadDeadline(time.Time{}); err != nil {
			ep.Close()
			return 0, fmt.Errorf("stderr poller: %w", err)
		}
		rc, err := ep.SyscallConn()
		if err != nil {
			ep.Close()
			return 0, err
		}
		p.ep = ep
		routine.Go("stdio.stderr", func() { p.run(ep, rc) })
	}
	for {
		p.next++
		if _, taken := p.subs[p.next]; !taken && p.next != 0 {
			break
		}
	}
	id := p.next
	rc, _ := p.ep.SyscallConn()
	var ctlErr error
	if err := rc.Control(func(epfd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: id}
		ctlErr = syscall.EpollCtl(int(epfd), syscall.EPOLL_CTL_ADD, fd, &ev)
	}); err != nil {
		return 0, err
	}
	if ctlErr != nil {
		return 0, os.NewSyscallError("epoll_ctl", ctlErr)
	}
	p.subs[id] = &stderrSub{fd: fd, sink: sink, done: done}
	return id, nil
}

// unwatch stops watching the stderr of handle id (if it is still
// watched), closes its descriptor and calls its done.
func (p *stderrPoller) unwatch(id int32) {
	p.mu.Lock()
	ep := p.drop(id)
	p.mu.Unlock()
	if ep != nil {
		ep.Close() // the poller goroutine ends
	}
}

// drop removes id; the caller holds mu. When it was the last one, the
// epoll instance is detached and returned, for the caller to close once
// it no longer holds mu.
func (p *stderrPoller) drop(id int32) *os.File {
	s := p.subs[id]
	if s == nil {
		return nil
	}
	delete(p.subs, id)
	if rc, err := p.ep.SyscallConn(); err == nil {
		_ = rc.Control(func(epfd uintptr) { _ = syscall.EpollCtl(int(epfd), syscall.EPOLL_CTL_DEL, s.fd, nil) })
	}
	syscall.Close(s.fd)
	s.done()
	if len(p.subs) > 0 {
		return nil
	}
	ep := p.ep
	p.ep = nil
	return ep
}

// run is the poller goroutine of the epoll instance ep: it reads every
// stderr that has bytes, until ep is closed (by whoever dropped the last
// stderr).
func (p *stderrPoller) run(ep *os.File, rc syscall.RawConn) {
	var own *os.File // set when this goroutine dropped the last stderr
	err := rc.Read(func(epfd uintptr) bool {
		for {
			p.mu.Lock()
			if p.ep != ep { // detached: another goroutine closes it
				p.mu.Unlock()
				return true
			}
			if p.evbuf == nil {
				p.evbuf = make([]syscall.EpollEvent, 64)
			}
			n, err := syscall.EpollWait(int(epfd), p.evbuf, 0)
			if err != nil && !errors.Is(err, syscall.EINTR) {
				n = 0
			}
			if n <= 0 {
				p.mu.Unlock()
				return false // nothing ready: sleep in the runtime's poller
			}
			for _, ev := range p.evbuf[:n] {
				if e := p.readOne(ev.Fd); e != nil {
					own = e
				}
			}
			p.mu.Unlock()
			if own != nil {
				return true
			}
		}
	})
	_ = err // ErrClosed once another goroutine closed ep
	if own != nil {
		own.Close()
	}
}

// readOne reads once from the stderr of handle id; the caller holds mu.
// At its end (EOF or an error) it is dropped; if it was the last, the
// detached epoll instance is returned.
func (p *stderrPoller) readOne(id int32) *os.File {
	s := p.subs[id]
	if s == nil {
		return nil // dropped since the event
	}
	if p.buf == nil {
		p.buf = make([]byte, stderrPollBuffer)
	}
	n, err := syscall.Read(s.fd, p.buf)
	if n > 0 {
		s.sink(p.buf[:n])
		return nil
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		return nil
	}
	return p.drop(id)
}

// openStderr makes the server's stderr pipe and starts reading its read
// end on the process's stderr poller (no goroutine of this connection's
// own). It returns the child's end and stop, which ends the reading and
// closes the read end (stderrDone is closed either way).
func (c *Conn) openStderr() (child *os.File, stop func(), err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	if err := syscall.SetNonblock(p[0], true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("setnonblock", err)
	}
	child = os.NewFile(uintptr(p[1]), "|child") // blocking: os.NewFile leaves it out of the poller
	id, err := stderrs.watch(p[0], c.stderrWrite, func() { close(c.stderrDone) })
	if err != nil {
		// Without the shared poller, a goroutine of this connection's own.
		c.opts.Logger.Debug().Err(err).Msg("reading the server's stderr on a goroutine of its own")
		r := os.NewFile(uintptr(p[0]), "|parent") // non-blocking: in the runtime's poller
		routine.Go("stdio.stderr", func() { c.drainStderr(r) })
		return child, func() { r.Close() }, nil
	}
	return child, func() { stderrs.unwatch(id) }, nil
}
