//go:build !unix

package config

import "os"

// openNonBlocking opens path for reading when it is a regular file; there
// is no FIFO to block on here, but a device is refused before it is
// opened.
func openNonBlocking(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrEnvFileNotRegular}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return f, nil
}
