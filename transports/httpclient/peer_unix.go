//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package httpclient

import (
	"net"
	"syscall"
)

// peerOpen reports whether an idle connection can carry another request:
// the peer has not closed it (a server's keep-alive timeout) and sent
// nothing unasked. It peeks at the socket without blocking.
func peerOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Only "nothing to read yet" means open: 0 bytes is the peer's
		// close, bytes are a response nobody asked for.
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
