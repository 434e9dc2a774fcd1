//go:build !linux && !windows

package stdio

import "os"

// pipe makes one of the server's pipes (see pipe_linux.go); parentReads
// says which end is the parent's.
func pipe(parentReads bool) (parent, child *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if parentReads {
		return r, w, nil
	}
	return w, r, nil
}
