// Package toolcache keeps, on disk, the tools each MCP server listed at
// its last connect, so that a host can offer a lazy server's tools before
// the server has ever been started in this run (the supervisor's
// discovery cache, Options.DiscoveryCache).
//
// An entry is keyed by the server's name and a hash of its config (what
// runs under the name: see the supervisor's ConfigHash): a server whose
// config changed finds no entry. Entries are files in a directory, one
// per server name, mode 0600, replaced atomically (a temporary file
// renamed over the old one), so that concurrent processes sharing the
// directory never read a torn entry: the last write wins. The package
// does no I/O but when called, and starts no goroutine.
package toolcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// version is the format of the entry files.
const version = 1

// maxEntry bounds an entry file read back.
const maxEntry = 16 << 20

// ErrMalformed: an entry file could not be read back (it is treated as
// missing, and replaced by the next Store).
var ErrMalformed = errors.New("toolcache: malformed entry")

// Cache is a directory of entries.
//
// Concurrency: safe for concurrent use, by goroutines and by processes
// sharing the directory (each write replaces a whole file atomically).
type Cache struct {
	dir string
	now func() time.Time
}

// New returns the cache kept in dir (created on the first Store). now is
// the clock of SavedAt; nil means time.Now.
func New(dir string, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{dir: dir, now: now}
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// entry is one file.
type entry struct {
	Version    int             `json:"version"`
	Server     string          `json:"server"`
	ConfigHash string          `json:"configHash"`
	SavedAt    time.Time       `json:"savedAt"`
	Tools      []protocol.Tool `json:"tools"`
}

// path is the file of server's entry: a hash of the name, so that any
// name (slashes, dots, non-ASCII) is a safe file name.
func (c *Cache) path(server string) string {
	sum := sha256.Sum256([]byte(server))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:16])+".json")
}

// Load returns the tools server listed when its config hash was
// configHash, and when they were saved; ok is false when there is no such
// entry (none, another config's, or one that cannot be read: err says
// which, nil for the first two).
func (c *Cache) Load(server, configHash string) (tools []protocol.Tool, savedAt time.Time, ok bool, err error) {
	p := c.path(server)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, time.Time{}, false, nil
	}
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("toolcache: %w", err)
	}
	defer f.Close()
	var e entry
	dec := json.NewDecoder(&limitReader{f: f, n: maxEntry})
	if err := dec.Decode(&e); err != nil {
		return nil, time.Time{}, false, fmt.Errorf("%w: %s: %v", ErrMalformed, p, err)
	}
	if e.Version != version || e.Server != server {
		return nil, time.Time{}, false, fmt.Errorf("%w: %s: version %d of server %q", ErrMalformed, p, e.Version, e.Server)
	}
	if e.ConfigHash != configHash {
		return nil, time.Time{}, false, nil
	}
	return e.Tools, e.SavedAt, true, nil
}

// Store replaces server's entry with tools, listed under config hash
// configHash.
func (c *Cache) Store(server, configHash string, tools []protocol.Tool) error {
	if tools == nil {
		tools = []protocol.Tool{}
	}
	b, err := json.Marshal(entry{Version: version, Server: server, ConfigHash: configHash, SavedAt: c.now().UTC(), Tools: tools})
	if err != nil {
		return fmt.Errorf("toolcache: %w", err)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("toolcache: %w", err)
	}
	p := c.path(server)
	tmp, err := os.CreateTemp(c.dir, "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return fmt.Errorf("toolcache: %w", err)
	}
	defer os.Remove(tmp.Name()) // nothing to remove after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("toolcache: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("toolcache: writing %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("toolcache: writing %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("toolcache: %w", err)
	}
	return nil
}

// Forget removes server's entry, if any.
func (c *Cache) Forget(server string) error {
	if err := os.Remove(c.path(server)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolcache: %w", err)
	}
	return nil
}

// limitReader reads at most n bytes of f, then fails: an entry larger
// than maxEntry is malformed rather than read whole.
type limitReader struct {
	f *os.File
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("larger than %d bytes", maxEntry)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}
