package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// The host and the reaper exchange JSON messages over a SOCK_SEQPACKET
// socket pair: one message per packet, descriptors alongside (a spawn
// request carries the server's stdin, stdout and stderr).

// The ops.
const (
	// host → reaper
	opSpawn   = "spawn"   // start a server (3 descriptors attached); answered by started or failed
	opSignal  = "signal"  // signal a server's whole tree (Signal 0: only note it); answered by signaled
	opRelease = "release" // a server has exited: end what is left of its tree; answered by released

	// reaper → host
	opHello    = "hello"    // the reaper runs (first message)
	opStarted  = "started"  // a spawn succeeded: Pid
	opFailed   = "failed"   // a spawn failed: Errno or Kind, Err
	opExited   = "exited"   // a server was reaped: Pid, Status
	opSignaled = "signaled" // answer to signal: Count
	opReleased = "released" // answer to release: Count processes were still alive
)

// message is every message, in either direction; Op says which members
// count.
type message struct {
	Op string `json:"op"`
	ID uint64 `json:"id,omitempty"` // pairs a request with its answer

	Pid int `json:"pid,omitempty"`

	// spawn
	Path    string          `json:"path,omitempty"`
	Argv    []string        `json:"argv,omitempty"`
	Env     []string        `json:"env,omitempty"`
	Dir     string          `json:"dir,omitempty"`
	Confine json.RawMessage `json:"confine,omitempty"` // a sandbox.Plan: run the exec stage

	Signal  int   `json:"signal,omitempty"`
	GraceMs int64 `json:"graceMs,omitempty"`

	Status int    `json:"status,omitempty"` // a wait status
	Count  int    `json:"count,omitempty"`
	Cgroup bool   `json:"cgroup,omitempty"` // hello: servers get cgroups; started: this one has one
	Errno  int    `json:"errno,omitempty"`
	Kind   string `json:"kind,omitempty"` // failed: "sandbox" for a sandbox that could not be had
	Err    string `json:"error,omitempty"`

	proc *Process // host side: the Process a "started" answer made
}

// maxMessage bounds one message (a spawn request carries the server's
// environment).
const maxMessage = 1 << 20

// errMessageTooLarge: a spawn request did not fit in one packet.
var errMessageTooLarge = errors.New("the request is larger than the socket's packet size (environment too large?)")

// packetConn is one end of the host–reaper socket, used with blocking
// system calls: its reader goroutine holds a thread while it waits, and a
// message wakes that thread directly, without the runtime's poller and
// the scheduler hop behind it (a spawn is two such hops: the request and
// its answer).
//
// Concurrency: send may be called from any goroutine; recv from one
// reader goroutine, which alone calls release when it is done with the
// socket; shutdown from any goroutine (it unblocks recv).
type packetConn struct {
	mu     sync.RWMutex // send holds it for reading; release for writing
	fd     int          // -1 once released
	closed bool
}

func newPacketConn(fd int) *packetConn { return &packetConn{fd: fd} }

// send writes m with fds attached, in one packet.
func (c *packetConn) send(m *message, fds ...int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.fd < 0 {
		return errClosedConn
	}
	for {
		err = syscall.Sendmsg(c.fd, b, oob, nil, syscall.MSG_NOSIGNAL)
		if err != syscall.EINTR {
			break
		}
	}
	if errors.Is(err, syscall.EMSGSIZE) {
		return errMessageTooLarge
	}
	return err
}

// recv reads one message and the descriptors attached to it (each
// returned as an *os.File, close-on-exec, that the caller must close).
// errEOF means the peer closed its end, or shutdown was called.
func (c *packetConn) recv(buf, oob []byte) (*message, []*os.File, error) {
	var n, oobn, flags int
	var err error
	for {
		// MSG_CMSG_CLOEXEC: a descriptor received is never inherited by a
		// process another goroutine starts meanwhile.
		n, oobn, flags, _, err = syscall.Recvmsg(c.fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	files, ferr := parseRights(oob[:oobn])
	if n == 0 && oobn == 0 {
		return nil, nil, errEOF
	}
	if flags&syscall.MSG_TRUNC != 0 || flags&syscall.MSG_CTRUNC != 0 {
		closeFiles(files)
		return nil, nil, errors.New("reaper: truncated message")
	}
	if ferr != nil {
		closeFiles(files)
		return nil, nil, ferr
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		closeFiles(files)
		return nil, nil, fmt.Errorf("reaper: malformed message: %w", err)
	}
	return &m, files, nil
}

// shutdown ends the connection in both directions (or, with writeOnly,
// only ours: the peer reads end-of-file, and may still answer). A recv
// in progress returns errEOF.
func (c *packetConn) shutdown(writeOnly bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.fd >= 0 {
		how := syscall.SHUT_RDWR
		if writeOnly {
			how = syscall.SHUT_WR
		}
		_ = syscall.Shutdown(c.fd, how)
	}
}

// release closes the descriptor; the reader calls it when it is done.
func (c *packetConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd >= 0 {
		syscall.Close(c.fd)
		c.fd = -1
	}
}

// errEOF: the peer closed its end (a zero-length packet is never sent).
var errEOF = errors.New("reaper: end of stream")

// errClosedConn: the socket was released.
var errClosedConn = errors.New("reaper: connection closed")

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, cm := range msgs {
		fds, err := syscall.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// socketPair makes the host's and the reaper's ends of a SOCK_SEQPACKET
// pair, blocking. Both are close-on-exec; the reaper's is passed to it
// explicitly.
func socketPair() (host *packetConn, reaper *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	for _, fd := range fds {
		// Large spawn requests (a big environment) fit in one packet.
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, maxMessage)
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, maxMessage)
	}
	return newPacketConn(fds[0]), os.NewFile(uintptr(fds[1]), "reaper-socket"), nil
}

// inheritedConn takes over an inherited descriptor, which must be a unix
// packet socket, as a blocking, close-on-exec packetConn.
func inheritedConn(fd int) (*packetConn, error) {
	typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("descriptor %d is not a socket: %w", fd, err)
	}
	if typ != syscall.SOCK_SEQPACKET {
		return nil, fmt.Errorf("descriptor %d is not a packet socket", fd)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, false); err != nil {
		return nil, err
	}
	return newPacketConn(fd), nil
}
