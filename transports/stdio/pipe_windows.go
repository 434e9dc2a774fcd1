//go:build windows

package stdio

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/windows"
)

// pipeSerial numbers this process's pipes.
var pipeSerial atomic.Uint64

// pipe makes one of the server's pipes out of handles: the parent's end
// is an overlapped named-pipe handle, which os.NewFile registers with the
// runtime's I/O completion port (so deadlines and Close interrupt its
// I/O, as on Unix); the child's end is an ordinary synchronous handle,
// what console programs expect for their standard handles, with the
// access rights CreatePipe would give it. The pipe accepts one client,
// local only, and its DACL admits only the current user. parentReads
// says which end is the parent's.
func pipe(parentReads bool) (parent, child *os.File, err error) {
	sa, err := ownerOnlyAttributes()
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf(`\\.\pipe\mcpvisor-%d-%d`, os.Getpid(), pipeSerial.Add(1))
	name16, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, nil, err
	}
	var openMode, childAccess uint32
	if parentReads {
		openMode = windows.PIPE_ACCESS_INBOUND
		childAccess = windows.GENERIC_WRITE | windows.FILE_READ_ATTRIBUTES
	} else {
		openMode = windows.PIPE_ACCESS_OUTBOUND
		childAccess = windows.GENERIC_READ | windows.FILE_WRITE_ATTRIBUTES
	}
	ph, err := windows.CreateNamedPipe(name16,
		openMode|windows.FILE_FLAG_OVERLAPPED|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		1, 64<<10, 64<<10, 0, sa)
	if err != nil {
		return nil, nil, os.NewSyscallError("CreateNamedPipe", err)
	}
	ch, err := windows.CreateFile(name16, childAccess, 0, sa, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		windows.CloseHandle(ph)
		return nil, nil, os.NewSyscallError("CreateFile", err)
	}
	return os.NewFile(uintptr(ph), "|parent"), os.NewFile(uintptr(ch), "|child"), nil
}

// ownerOnlyAttributes are security attributes whose DACL grants the
// current user alone, not inheritable (os/exec makes the child's copies).
func ownerOnlyAttributes() (*windows.SecurityAttributes, error) {
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("reading the current user: %w", err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(A;;GA;;;" + user.User.Sid.String() + ")")
	if err != nil {
		return nil, fmt.Errorf("building the pipe's DACL: %w", err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	return sa, nil
}
