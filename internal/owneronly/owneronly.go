// Package owneronly creates directories and files that only their owner
// may use: mode 0700 and 0600 on Unix; on Windows, where those modes mean
// nothing, a protected DACL that grants the current user alone (no
// inherited entries, so an ACL of a shared parent folder does not reach
// in). Only what MkdirAll creates is restricted: an existing directory
// keeps the permissions its owner gave it.
package owneronly

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// MkdirAll creates dir and any missing parents, each restricted to the
// current user.
func MkdirAll(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := restrictDir(missing[i]); err != nil {
			return err
		}
	}
	return nil
}

// Restrict makes the file at path readable and writable by the current
// user alone. Call it before writing secrets into the file.
func Restrict(path string) error { return restrictFile(path) }
