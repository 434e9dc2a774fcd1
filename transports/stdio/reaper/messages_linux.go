package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
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

// send writes m with fds attached.
func send(c *net.UnixConn, m *message, fds ...int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		if errors.Is(err, syscall.EMSGSIZE) {
			return errMessageTooLarge
		}
		return err
	}
	return nil
}

// receive reads one message and the descriptors attached to it (each
// returned as an *os.File the caller must close).
func receive(c *net.UnixConn, buf, oob []byte) (*message, []*os.File, error) {
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 && oobn == 0 {
		return nil, nil, errEOF
	}
	files, ferr := parseRights(oob[:oobn])
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

// errEOF: the peer closed its end (a zero-length packet is never sent).
var errEOF = errors.New("reaper: end of stream")

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
			syscall.CloseOnExec(fd)
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
// pair. Both are close-on-exec; the reaper's is passed to it explicitly.
func socketPair() (host *net.UnixConn, reaper *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	for _, fd := range fds {
		// Large spawn requests (a big environment) fit in one packet.
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, maxMessage)
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, maxMessage)
	}
	hostFile := os.NewFile(uintptr(fds[0]), "reaper-socket")
	defer hostFile.Close() // FileConn dups it
	c, err := net.FileConn(hostFile)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "reaper-socket"), nil
}

// fileConn wraps an inherited descriptor as a *net.UnixConn.
func fileConn(fd uintptr) (*net.UnixConn, error) {
	f := os.NewFile(fd, "reaper-socket")
	if f == nil {
		return nil, errors.New("no such descriptor")
	}
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("descriptor %d is not a unix socket", fd)
	}
	return uc, nil
}
