package stdio

import (
	"os"
	"syscall"
)

// pipe makes one of the server's pipes: the parent's end is pollable
// (non-blocking and registered with the runtime's poller, so deadlines
// and Close interrupt its I/O), the child's end is a plain blocking
// descriptor that is never registered. os.Pipe would register both ends
// and exec would then set the child's back to blocking, and closing it
// deregister it again: a dozen system calls per server, in a connect
// storm a few per cent of the client's CPU. parentReads says which end
// is the parent's.
func pipe(parentReads bool) (parent, child *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	pfd, cfd := p[1], p[0]
	if parentReads {
		pfd, cfd = p[0], p[1]
	}
	if err := syscall.SetNonblock(pfd, true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("setnonblock", err)
	}
	// os.NewFile registers a non-blocking descriptor with the poller, and
	// leaves a blocking one alone.
	return os.NewFile(uintptr(pfd), "|parent"), os.NewFile(uintptr(cfd), "|child"), nil
}
