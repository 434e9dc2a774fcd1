package confine

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The socket filter of a server without network: a classic BPF program
// for seccomp, built here by hand (no libseccomp). It lets a server make
// unix sockets it can use with its own processes (socket and socketpair
// of AF_UNIX, stream or seqpacket) and nothing else:
//
//   - socket and socketpair of any other family (TCP and UDP over IPv4
//     and IPv6, raw and packet sockets, netlink, vsock…) fail with
//     EAFNOSUPPORT;
//   - an AF_UNIX datagram socket fails with EACCES: sendto and sendmsg
//     reach any named socket (/dev/log, the journal) from one, connected
//     or not;
//   - connect fails with EACCES: the only sockets a server can make are
//     unix ones, and connecting one reaches a named socket outside
//     (ssh-agent, docker.sock, D-Bus) or an abstract one; a listening
//     socket still accepts, and socketpair needs no connect;
//   - io_uring_setup fails with ENOSYS (io_uring's socket and connect
//     operations do not pass through seccomp; programs fall back to
//     plain system calls);
//   - a system call of another ABI (x32 on amd64, or i386 through int
//     0x80, whose socketcall would bypass the checks) fails with ENOSYS.
//
// The filter is inherited by every process the server starts and cannot
// be removed.

// Errors the filter returns, as errno values.
const (
	filterDenied      = unix.EACCES
	filterNoFamily    = unix.EAFNOSUPPORT
	filterNoSyscall   = unix.ENOSYS
	sockTypeMask      = 0xf // SOCK_TYPE_MASK: the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	x32SyscallBit     = 0x40000000
	seccompDataNr     = 0 // offsets in struct seccomp_data
	seccompDataArch   = 4
	seccompDataArgLow = 16 // args[i] at 16+8*i; its low 32 bits first (little endian)
)

// nativeArch is the AUDIT_ARCH_* value of this program's ABI, or 0 where
// the filter is not built.
func nativeArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// insn is one BPF instruction whose jumps name labels.
type insn struct {
	label  string // this instruction's label, or ""
	code   uint16
	k      uint32
	jt, jf string // jump targets (labels); "" is the next instruction
}

// assemble resolves the labels into relative jumps.
func assemble(prog []insn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	off := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := at[label]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("seccomp filter: bad jump to %q", label)
		}
		return uint8(to - from - 1), nil
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		jt, err := off(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := off(i, in.jf)
		if err != nil {
			return nil, err
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k}
	}
	return out, nil
}

// SocketFilter returns the seccomp program of a server without network
// (see above). It fails on an architecture it does not know.
func SocketFilter() ([]unix.SockFilter, error) {
	arch := nativeArch()
	if arch == 0 {
		return nil, fmt.Errorf("no socket filter for %s", runtime.GOARCH)
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	prog := []insn{
		{code: ld, k: seccompDataArch},
		{code: jeq, k: arch, jf: "nosys"},
		{code: ld, k: seccompDataNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, insn{code: jge, k: x32SyscallBit, jt: "nosys"})
	}
	prog = append(prog,
		insn{code: jeq, k: unix.SYS_SOCKET, jt: "socket"},
		insn{code: jeq, k: unix.SYS_SOCKETPAIR, jt: "socket"},
		insn{code: jeq, k: unix.SYS_CONNECT, jt: "denied"},
		insn{code: jeq, k: unix.SYS_IO_URING_SETUP, jt: "nosys"},
		insn{code: ret, k: unix.SECCOMP_RET_ALLOW},
		insn{label: "socket", code: ld, k: seccompDataArgLow}, // the family
		insn{code: jeq, k: unix.AF_UNIX, jf: "nofamily"},
		insn{code: ld, k: seccompDataArgLow + 8}, // the type
		insn{code: and, k: sockTypeMask},
		insn{code: jeq, k: unix.SOCK_STREAM, jt: "unix"},
		insn{code: jeq, k: unix.SOCK_SEQPACKET, jt: "unix"},
		insn{label: "denied", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(filterDenied)},
		insn{label: "nofamily", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(filterNoFamily)},
		insn{label: "nosys", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(filterNoSyscall)},
		insn{label: "unix", code: ret, k: unix.SECCOMP_RET_ALLOW}, // BPF jumps only forward
	)
	return assemble(prog)
}

// SocketFilterBytes is SocketFilter as the bytes bubblewrap's --seccomp
// reads from a descriptor (struct sock_filter, one after another).
func SocketFilterBytes() ([]byte, error) {
	prog, err := SocketFilter()
	if err != nil {
		return nil, err
	}
	const size = int(unsafe.Sizeof(unix.SockFilter{}))
	out := make([]byte, 0, len(prog)*size)
	for i := range prog {
		out = append(out, unsafe.Slice((*byte)(unsafe.Pointer(&prog[i])), size)...)
	}
	return out, nil
}

// SocketFilterFile returns a memory file holding SocketFilterBytes, at
// offset 0 and not closed on exec, for bubblewrap's --seccomp. The caller
// closes it.
func SocketFilterFile() (int, error) {
	b, err := SocketFilterBytes()
	if err != nil {
		return -1, err
	}
	fd, err := unix.MemfdCreate("mcpvisor-seccomp", 0)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	for rest := b; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("writing the seccomp filter: %w", err)
		}
		rest = rest[n:]
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("writing the seccomp filter: %w", err)
	}
	return fd, nil
}

// installSocketFilter applies SocketFilter to the calling thread (and
// what it executes). The caller has set no_new_privs.
func installSocketFilter() error {
	prog, err := SocketFilter()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_SECCOMP): %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}
