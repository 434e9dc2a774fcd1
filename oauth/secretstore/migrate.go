package secretstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpvisor/mcpvisor/oauth"
)

// Migrate moves the entries of the file store at file into dst and then
// removes the file, overwritten first, with any temporary copies a
// crashed writer left beside it: afterwards no token of the file is in
// plain text on disk (as far as overwriting in place reaches: a
// copy-on-write filesystem or a backup may still hold old blocks). An
// entry dst already holds in a newer version is kept. It runs under
// dst's refresh lock and the file's, so that no process is refreshing
// with either while it moves. A missing file is nothing to do. It
// returns how many entries it copied.
func Migrate(ctx context.Context, file string, dst *Store) (int, error) {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	unlockDst, err := dst.Lock(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("secretstore: migrating %s: %w", file, err)
	}
	defer unlockDst()
	src := &oauth.FileStore{Path: file}
	unlockSrc, err := src.Lock(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("secretstore: migrating %s: %w", file, err)
	}
	defer unlockSrc()
	entries, err := src.List(ctx) // empty if another process migrated it meanwhile
	if err != nil {
		return 0, fmt.Errorf("secretstore: migrating %s: %w", file, err)
	}
	n := 0
	for _, e := range entries {
		cur, err := dst.Load(ctx, e.ServerURL, e.Issuer)
		if err != nil {
			return n, fmt.Errorf("secretstore: migrating %s: %w", file, err)
		}
		if cur != nil && !e.UpdatedAt.After(cur.UpdatedAt) {
			continue
		}
		if err := dst.Save(ctx, e); err != nil {
			return n, fmt.Errorf("secretstore: migrating %s: %w", file, err)
		}
		n++
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".*.tmp"))
	for _, p := range append(leftovers, file) {
		if err := scrub(p); err != nil {
			return n, fmt.Errorf("secretstore: migrated %d entries but could not remove %s: %w", n, p, err)
		}
	}
	return n, nil
}

// scrub overwrites the file at path with zeros, syncs, and removes it.
func scrub(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil {
		_, err = f.WriteAt(make([]byte, fi.Size()), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Remove(path)
}
