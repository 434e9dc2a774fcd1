//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package httpclient

import "net"

// peerOpen reports true: without a non-blocking peek, a connection the
// server closed is only found by the next request's failure.
func peerOpen(net.Conn) bool { return true }
