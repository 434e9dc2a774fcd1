package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpvisor/mcpvisor/cmd/mcpvisor/internal/mcpfile"
	"github.com/mcpvisor/mcpvisor/internal/filelock"
)

// editLockWait bounds the wait for another mcpvisor editing the same
// config file.
const editLockWait = 10 * time.Second

// errEditLocked is returned when another process holds a config file's
// edit lock for longer than editLockWait.
var errEditLocked = errors.New("another mcpvisor is editing this config file")

// errProjectLink is returned when a config file of the project directory
// (the project and local scopes) is a symbolic link: whoever wrote the
// project chose where it points (the user's own ~/.mcp.json, say), and
// mcpvisor never wrote it, so it does not write through it.
var errProjectLink = errors.New("is a symbolic link in the project directory, which mcpvisor did not create: it does not write through it (replace the link by a file to edit it here)")

// edit applies change to the config file of s and writes the
// result atomically (mcpfile.Replace), under a lock that mcpvisor
// processes editing the same file share (kept in the state directory,
// never beside the file), so that two concurrent adds both land. It
// returns the file written (s.path with its links resolved) and what was
// written to it.
//
// A file of the project directory (project and local scopes) that is a
// symbolic link is refused (errProjectLink); the user's own files may be
// links (dotfiles kept elsewhere), and are written where they point.
func (c *configFiles) edit(ctx context.Context, s scopeFile, change func(*mcpfile.File) ([]byte, error)) (string, []byte, error) {
	if !s.trusted() {
		if fi, err := os.Lstat(s.path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return "", nil, errProjectLink
		}
	}
	target, err := mcpfile.Target(s.path)
	if err != nil {
		return "", nil, err
	}
	unlock, err := c.lock(ctx, target)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	was, err := mcpfile.Read(target)
	if err != nil {
		return "", nil, err
	}
	f, err := mcpfile.Parse(was)
	if err != nil {
		return "", nil, err
	}
	data, err := change(f)
	if err != nil {
		return "", nil, err
	}
	return target, data, mcpfile.Replace(target, was, data, s.newFileMode())
}

// lock takes the edit lock of the config file target (absolute,
// links resolved). Without a usable state directory there is no lock
// (logged): Replace still refuses to overwrite a file that changed since
// it was read.
func (c *configFiles) lock(ctx context.Context, target string) (func(), error) {
	dir, err := c.state.path()
	if err != nil {
		c.out.log.Debug().Err(err).Msg("no state directory: editing the config file without a lock")
		return func() {}, nil
	}
	sum := sha256.Sum256([]byte(target))
	path := filepath.Join(dir, "locks", "config-"+hex.EncodeToString(sum[:8])+".lock")
	ctx, cancel := context.WithTimeout(ctx, editLockWait)
	defer cancel()
	unlock, err := filelock.Lock(ctx, path)
	switch {
	case err == nil:
		return unlock, nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w (lock %s held for %v)", errEditLocked, path, editLockWait)
	case ctx.Err() != nil:
		return nil, err
	}
	c.out.log.Warn().Err(err).Msg("cannot take the config file's edit lock: editing without it")
	return func() {}, nil
}
