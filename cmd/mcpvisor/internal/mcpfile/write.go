package mcpfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrChanged is returned by Replace when the file no longer holds what
// was read: someone else wrote it in between. Nothing was written.
var ErrChanged = errors.New("the file changed while it was being edited; nothing was written")

// Target is the file that writing path changes: path with its symbolic
// links resolved, so that a config file kept elsewhere and linked into
// place stays a link. A path that does not exist yet is its own target
// (its directory's links resolved); a link to nothing is an error.
func Target(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return "", fmt.Errorf("%s is a symbolic link to a file that does not exist", path)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(path)), nil
}

// Read returns the content of path (a Target), or nil when it does not
// exist.
func Read(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Replace writes data to path (a Target) atomically: a temporary file in
// the same directory, with the mode of the file it replaces (perm for a
// new file), synced, then renamed over path. A reader sees the old
// content or the new, never a part. was is what path held when it was
// read (nil: it did not exist); if it holds something else now, Replace
// writes nothing and returns ErrChanged. (Between that check and the
// rename a writer that does not lock can still slip in: callers that can
// take a lock around read and Replace should.)
func Replace(path string, was, data []byte, perm fs.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing left to remove after the rename
	fail := func(err error) error {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	now, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if was != nil {
			return ErrChanged
		}
	case err != nil:
		return err
	case was == nil || !bytes.Equal(now, was):
		return ErrChanged
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable where the system allows it (not
// on Windows, where a directory cannot be opened for syncing).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
