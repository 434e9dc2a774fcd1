package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/filelock"
	"github.com/mcpvisor/mcpvisor/internal/owneronly"
)

// Entry is what a Store keeps for one MCP server and one authorization
// server: the client identity registered there and the tokens it issued.
// Credentials are never used with another issuer than their entry's.
type Entry struct {
	// ServerURL is the MCP server's canonical URL; Issuer the
	// authorization server's issuer. Together they are the key.
	ServerURL string
	Issuer    string
	Client    *ClientInfo // nil: none registered yet
	Token     *Token      // nil: not authorized (or the grant ended)
	// Scope is the scope last requested (the union after step-ups).
	Scope     string
	UpdatedAt time.Time
}

// Store persists credentials. Implementations are safe for concurrent
// use. Load with an empty issuer returns the server's most recently
// updated entry. Lock serialises refreshes of one server's tokens across
// every user of the store (processes included, for a file store): the
// holder re-reads the entry, refreshes and saves before unlocking, so a
// refresh token is never spent twice.
type Store interface {
	Load(ctx context.Context, serverURL, issuer string) (*Entry, error) // nil, nil when absent
	Save(ctx context.Context, e *Entry) error
	// Delete removes the server's entry for issuer, or all its entries
	// when issuer is empty.
	Delete(ctx context.Context, serverURL, issuer string) error
	List(ctx context.Context) ([]*Entry, error)
	Lock(ctx context.Context, serverURL string) (unlock func(), err error)
}

// cloneEntry copies e deeply enough that callers cannot alter the store.
func cloneEntry(e *Entry) *Entry {
	if e == nil {
		return nil
	}
	c := *e
	if e.Client != nil {
		ci := *e.Client
		c.Client = &ci
	}
	if e.Token != nil {
		t := *e.Token
		c.Token = &t
	}
	return &c
}

// MemoryStore is a Store in memory, for hosts that persist nothing and for
// tests. The zero value is ready.
type MemoryStore struct {
	mu      sync.Mutex
	entries map[[2]string]*Entry     // guarded by mu
	locks   map[string]chan struct{} // guarded by mu; one-slot semaphores per server
}

// Load implements Store.
func (m *MemoryStore) Load(_ context.Context, serverURL, issuer string) (*Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneEntry(pick(m.entries, serverURL, issuer)), nil
}

func pick(entries map[[2]string]*Entry, serverURL, issuer string) *Entry {
	if issuer != "" {
		return entries[[2]string{serverURL, issuer}]
	}
	var best *Entry
	for k, e := range entries {
		if k[0] == serverURL && (best == nil || e.UpdatedAt.After(best.UpdatedAt)) {
			best = e
		}
	}
	return best
}

// Save implements Store.
func (m *MemoryStore) Save(_ context.Context, e *Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[[2]string]*Entry{}
	}
	m.entries[[2]string{e.ServerURL, e.Issuer}] = cloneEntry(e)
	return nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(_ context.Context, serverURL, issuer string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.entries {
		if k[0] == serverURL && (issuer == "" || k[1] == issuer) {
			delete(m.entries, k)
		}
	}
	return nil
}

// List implements Store, sorted by server URL then issuer.
func (m *MemoryStore) List(context.Context) ([]*Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedEntries(m.entries), nil
}

func sortedEntries(entries map[[2]string]*Entry) []*Entry {
	out := make([]*Entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, cloneEntry(e))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ServerURL != out[j].ServerURL {
			return out[i].ServerURL < out[j].ServerURL
		}
		return out[i].Issuer < out[j].Issuer
	})
	return out
}

// Lock implements Store: one lock per server, in this process; the wait
// ends with ctx.
func (m *MemoryStore) Lock(ctx context.Context, serverURL string) (func(), error) {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]chan struct{}{}
	}
	ch, ok := m.locks[serverURL]
	if !ok {
		ch = make(chan struct{}, 1)
		m.locks[serverURL] = ch
	}
	m.mu.Unlock()
	select {
	case ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-ch }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// FileStore is a Store in one JSON file (mode 0600; on Windows a DACL
// that admits only the owner), shared safely by
// several processes: every write goes to a temporary file that replaces
// the store by rename, and Lock takes an exclusive lock on Path+".lock"
// (flock, LockFileEx on Windows: held across processes). Loads read the file afresh, so a process sees
// what another saved.
type FileStore struct {
	// Path is the store file. Its directory is created (0700) on the
	// first save.
	Path string

	mu sync.Mutex // serialises this process's read-modify-write cycles
}

// fileFormat is the store file's content. Token values are stored in
// full (the file is the secret); fileToken is not the redacting Token.
type fileFormat struct {
	Version int         `json:"version"`
	Entries []fileEntry `json:"entries"`
}

type fileEntry struct {
	ServerURL string      `json:"server_url"`
	Issuer    string      `json:"issuer"`
	Client    *fileClient `json:"client,omitempty"`
	Token     *fileToken  `json:"token,omitempty"`
	Scope     string      `json:"scope,omitempty"`
	UpdatedAt time.Time   `json:"updated_at"`
}

type fileClient struct {
	ClientID        string    `json:"client_id"`
	ClientSecret    string    `json:"client_secret,omitempty"`
	AuthMethod      string    `json:"auth_method,omitempty"`
	Source          string    `json:"source,omitempty"`
	RedirectURIs    []string  `json:"redirect_uris,omitempty"`
	SecretExpiresAt time.Time `json:"secret_expires_at,omitzero"`
}

type fileToken struct {
	AccessToken   string    `json:"access_token"`
	TokenType     string    `json:"token_type,omitempty"`
	RefreshToken  string    `json:"refresh_token,omitempty"`
	Scope         string    `json:"scope,omitempty"`
	Expiry        time.Time `json:"expiry"`
	ExpiryAssumed bool      `json:"expiry_assumed,omitempty"`
	DPoPKey       string    `json:"dpop_key,omitempty"` // the key a DPoP-bound token needs
}

func (f *FileStore) read() (map[[2]string]*Entry, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return map[[2]string]*Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oauth store: %w", err)
	}
	var ff fileFormat
	if err := json.Unmarshal(b, &ff); err != nil {
		return nil, fmt.Errorf("oauth store %s: %w", f.Path, err)
	}
	out := make(map[[2]string]*Entry, len(ff.Entries))
	for _, fe := range ff.Entries {
		e := fe.entry()
		out[[2]string{e.ServerURL, e.Issuer}] = e
	}
	return out, nil
}

func (f *FileStore) write(entries map[[2]string]*Entry) error {
	ff := fileFormat{Version: 1}
	for _, e := range sortedEntries(entries) {
		ff.Entries = append(ff.Entries, recordOf(e))
	}
	b, err := json.MarshalIndent(ff, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.Path)
	if err := owneronly.MkdirAll(dir); err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if err := owneronly.Restrict(tmp.Name()); err != nil {
		tmp.Close()
		return fmt.Errorf("oauth store: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("oauth store: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("oauth store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	return nil
}

// Load implements Store, reading the file afresh.
func (f *FileStore) Load(_ context.Context, serverURL, issuer string) (*Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries, err := f.read()
	if err != nil {
		return nil, err
	}
	return cloneEntry(pick(entries, serverURL, issuer)), nil
}

// modify runs a read-modify-write cycle under the in-process mutex and a
// short exclusive flock on the data file's lock, so that concurrent
// writers of other entries do not lose each other's updates.
func (f *FileStore) modify(ctx context.Context, change func(map[[2]string]*Entry)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	unlock, err := filelock.Lock(ctx, f.Path+".write.lock")
	if err != nil {
		return err
	}
	defer unlock()
	entries, err := f.read()
	if err != nil {
		return err
	}
	change(entries)
	return f.write(entries)
}

// Save implements Store: the file is rewritten (temporary file, fsync,
// rename) under a write lock, so concurrent savers lose nothing.
func (f *FileStore) Save(ctx context.Context, e *Entry) error {
	return f.modify(ctx, func(m map[[2]string]*Entry) { m[[2]string{e.ServerURL, e.Issuer}] = cloneEntry(e) })
}

// Delete implements Store.
func (f *FileStore) Delete(ctx context.Context, serverURL, issuer string) error {
	return f.modify(ctx, func(m map[[2]string]*Entry) {
		for k := range m {
			if k[0] == serverURL && (issuer == "" || k[1] == issuer) {
				delete(m, k)
			}
		}
	})
}

// List implements Store, sorted by server URL then issuer.
func (f *FileStore) List(context.Context) ([]*Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries, err := f.read()
	if err != nil {
		return nil, err
	}
	return sortedEntries(entries), nil
}

// Lock takes the cross-process refresh lock of the store (one for all
// servers: refreshes are rare and short).
func (f *FileStore) Lock(ctx context.Context, _ string) (func(), error) {
	return filelock.Lock(ctx, f.Path+".lock")
}
