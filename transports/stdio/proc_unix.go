//go:build unix

package stdio

import "syscall"

// writeOnce makes one write of buf to the non-blocking descriptor behind
// raw and returns how many bytes it wrote (0 on any error).
func writeOnce(raw syscall.RawConn, buf []byte) int {
	n := 0
	err := raw.Write(func(fd uintptr) bool {
		m, err := syscall.Write(int(fd), buf)
		if err == nil {
			n = m
		}
		return true // one attempt, whatever happened
	})
	if err != nil {
		return 0
	}
	return n
}
