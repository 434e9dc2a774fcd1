//go:build unix

package config

import (
	"os"
	"syscall"
)

// openNonBlocking opens path for reading without blocking: opening a FIFO
// with no writer, or a terminal, returns at once (readEnvFileBytes then
// refuses what is not a regular file; reading a regular file ignores
// O_NONBLOCK).
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
