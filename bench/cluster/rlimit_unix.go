//go:build unix

package main

import "syscall"

// raiseFileLimit lifts this process's descriptor limit to its hard
// limit; the mock and the members inherit it (10,000 servers are 10,000
// connections on each side).
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
