package trust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ErrMalformed is wrapped when a state file exists but is not what this
// package wrote (not JSON, or another format version). Nothing is
// overwritten then: the user's decisions are never silently dropped.
var ErrMalformed = errors.New("trust: malformed state file")

// fileVersion is the format version of every state file.
const fileVersion = 1

// Store keeps approvals and tool pins in one state directory (see the
// package documentation for the layout). The zero value is not usable:
// make one with NewStore.
//
// Concurrency: a Store is safe for concurrent use, also with other Stores
// (in this process or another) on the same directory: every
// read-modify-write cycle of a file holds an exclusive flock on that
// file's lock (flocks belong to open files, so they exclude goroutines of
// one process too), and readers see a file either whole before or whole
// after a write (rename). Each server's pins have a lock of their own, so
// servers connecting together do not wait for each other.
type Store struct {
	dir string
	// now gives the time recorded with approvals and pins.
	now func() time.Time
}

// NewStore returns the store in dir, which is created (mode 0700) on the
// first write. now gives the time recorded with decisions; nil means
// time.Now.
func NewStore(dir string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{dir: dir, now: now}
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Files returns the files whose change means that decisions changed: the
// approvals file and the directory of tool pins (a watcher compares their
// modification times).
func (s *Store) Files() []string {
	return []string{s.approvalsPath(), s.pinsDir()}
}

// modify runs change under the lock file lock (a path inside the store's
// directory), creating the lock's directory first. change reads and
// writes the files itself.
func (s *Store) modify(ctx context.Context, lock string, change func() error) error {
	if err := os.MkdirAll(filepath.Dir(lock), 0o700); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	unlock, err := lockFile(ctx, lock)
	if err != nil {
		return err
	}
	defer unlock()
	return change()
}

// readJSON decodes the file at path into v and reports whether it
// existed. A file of another format version is ErrMalformed.
func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("trust: %w", err)
	}
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return true, fmt.Errorf("%w: %s: %v", ErrMalformed, path, err)
	}
	if head.Version != fileVersion {
		return true, fmt.Errorf("%w: %s: format version %d, want %d", ErrMalformed, path, head.Version, fileVersion)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("%w: %s: %v", ErrMalformed, path, err)
	}
	return true, nil
}

// writeJSON replaces the file at path with v, mode 0600: a temporary file
// in the same directory, synced, renamed over it.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	defer os.Remove(tmp.Name()) // nothing left to remove after the rename
	fail := func(err error) error {
		tmp.Close()
		return fmt.Errorf("trust: writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("trust: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("trust: writing %s: %w", path, err)
	}
	return nil
}
