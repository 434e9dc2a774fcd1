package secretstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpvisor/mcpvisor/internal/filelock"
	"github.com/mcpvisor/mcpvisor/oauth"
)

// Store is an oauth.Store that keeps each entry as one secret of an OS
// secret store, the entry's stored form (oauth.MarshalEntry) as an opaque
// value under a name made of its server URL and issuer. Nothing secret
// touches the disk outside the OS store: the lock files it shares with
// other processes are empty.
//
// A record larger than the backend's item limit (Windows Credential
// Manager takes 2,560 bytes) is split into chunks, written before the
// item that names them, so a reader never sees half of a new record and
// a crash leaves at worst unreferenced chunks, removed by the next save.
//
// Concurrency: safe for concurrent use, and by several processes at once.
// Every read goes to the OS store (nothing is cached), Save and Delete run
// under an exclusive file lock (LockPath+".write") so that two writers of
// one entry's chunks cannot interleave, and Lock is the cross-process
// refresh lock of oauth.Store (LockPath): the holder re-reads, refreshes
// and saves, so a refresh token is spent once whichever process holds it.
type Store struct {
	backend  string
	open     func() (vault, error)
	lockPath string
	where    string

	mu sync.Mutex // serialises this process's writes (the file lock does across processes)
}

// Backend names the OS store in use: "secret-service", "keyctl",
// "keychain" or "wincred".
func (s *Store) Backend() string { return s.backend }

// Where says where the secrets are kept (service, collection, keyring),
// for status output.
func (s *Store) Where() string { return s.where }

// LockPath is the file whose lock serialises refreshes across processes.
func (s *Store) LockPath() string { return s.lockPath }

// Item names: one head per entry, and the chunks of a split record.
const (
	headPrefix  = "entry:"
	chunkPrefix = "chunk:"
	chunkedMark = "chunks "
)

// entryKey is the part of an item name that identifies an entry.
func entryKey(serverURL, issuer string) string {
	b, _ := json.Marshal([2]string{serverURL, issuer})
	return string(b)
}

func parseEntryKey(k string) (serverURL, issuer string, ok bool) {
	var v [2]string
	if json.Unmarshal([]byte(k), &v) != nil {
		return "", "", false
	}
	return v[0], v[1], true
}

func chunkName(key, gen string, i int) string {
	return chunkPrefix + gen + ":" + strconv.Itoa(i) + ":" + key
}

func label(e *oauth.Entry) string {
	return "mcpvisor OAuth credentials for " + e.ServerURL + " (issuer " + e.Issuer + ")"
}

// with runs f on a freshly opened vault.
func (s *Store) with(f func(v vault) error) error {
	v, err := s.open()
	if err != nil {
		return err
	}
	defer v.close()
	return f(v)
}

// chunking describes a split record: its generation and chunk count.
type chunking struct {
	gen string
	n   int
}

// parseHead tells a head value holding a record from one naming chunks.
func parseHead(b []byte) (chunking, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(chunkedMark))
	if !ok {
		return chunking{}, false
	}
	gen, n, ok := strings.Cut(string(rest), " ")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count <= 0 || gen == "" {
		return chunking{gen: "?"}, true
	}
	return chunking{gen: gen, n: count}, true
}

// read returns the entry under key, nil when there is none.
func read(v vault, key string) (*oauth.Entry, error) {
	head, err := v.get(headPrefix + key)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c, split := parseHead(head); split {
		if c.n == 0 {
			return nil, fmt.Errorf("%w: %s names no chunks", ErrCorrupt, key)
		}
		var rec []byte
		for i := range c.n {
			part, err := v.get(chunkName(key, c.gen, i))
			if err != nil {
				return nil, fmt.Errorf("%w: chunk %d of %d of %s: %v", ErrCorrupt, i+1, c.n, key, err)
			}
			rec = append(rec, part...)
		}
		head = rec
	}
	e, err := oauth.UnmarshalEntry(head)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return e, nil
}

// write stores e under its key: the chunks of a record too large for one
// item first, then the head, then the previous record's chunks go.
func write(v vault, e *oauth.Entry) error {
	rec, err := oauth.MarshalEntry(e)
	if err != nil {
		return err
	}
	key := entryKey(e.ServerURL, e.Issuer)
	old, _ := v.get(headPrefix + key)
	oldChunks, _ := parseHead(old)
	head := rec
	if max := v.maxValue(); max > 0 && len(rec) > max {
		var g [8]byte
		_, _ = rand.Read(g[:])
		gen := hex.EncodeToString(g[:])
		n := 0
		for off := 0; off < len(rec); off += max {
			if err := v.set(chunkName(key, gen, n), label(e), rec[off:min(off+max, len(rec))]); err != nil {
				return err
			}
			n++
		}
		head = []byte(chunkedMark + gen + " " + strconv.Itoa(n))
	}
	if err := v.set(headPrefix+key, label(e), head); err != nil {
		return err
	}
	return removeChunks(v, key, oldChunks.gen)
}

// removeChunks deletes the chunks of key's record generation gen ("":
// none; "?": every generation, after a damaged head).
func removeChunks(v vault, key, gen string) error {
	if gen == "" {
		return nil
	}
	names, err := v.names()
	if err != nil {
		return err
	}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, chunkPrefix)
		if !ok {
			continue
		}
		g, rest, _ := strings.Cut(rest, ":")
		_, k, _ := strings.Cut(rest, ":")
		if k == key && (gen == "?" || g == gen) {
			if err := v.remove(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// keys lists the entry keys in the vault.
func keys(v vault) ([]string, error) {
	names, err := v.names()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if k, ok := strings.CutPrefix(n, headPrefix); ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Load implements oauth.Store, reading the OS store afresh.
func (s *Store) Load(_ context.Context, serverURL, issuer string) (*oauth.Entry, error) {
	var out *oauth.Entry
	err := s.with(func(v vault) error {
		if issuer != "" {
			e, err := read(v, entryKey(serverURL, issuer))
			out = e
			return err
		}
		ks, err := keys(v)
		if err != nil {
			return err
		}
		for _, k := range ks {
			if u, _, ok := parseEntryKey(k); !ok || u != serverURL {
				continue
			}
			e, err := read(v, k)
			if err != nil {
				return err
			}
			if e != nil && (out == nil || e.UpdatedAt.After(out.UpdatedAt)) {
				out = e
			}
		}
		return nil
	})
	return out, err
}

// modify runs f under the in-process mutex and the cross-process write
// lock.
func (s *Store) modify(ctx context.Context, f func(v vault) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := filelock.Lock(ctx, s.lockPath+".write")
	if err != nil {
		return err
	}
	defer unlock()
	return s.with(f)
}

// Save implements oauth.Store.
func (s *Store) Save(ctx context.Context, e *oauth.Entry) error {
	if e == nil {
		return oauth.ErrNilEntry
	}
	return s.modify(ctx, func(v vault) error { return write(v, e) })
}

// Delete implements oauth.Store: the server's entry for issuer, or all
// of them when issuer is empty.
func (s *Store) Delete(ctx context.Context, serverURL, issuer string) error {
	return s.modify(ctx, func(v vault) error {
		ks, err := keys(v)
		if err != nil {
			return err
		}
		for _, k := range ks {
			u, iss, ok := parseEntryKey(k)
			if !ok || u != serverURL || (issuer != "" && iss != issuer) {
				continue
			}
			head, _ := v.get(headPrefix + k)
			c, _ := parseHead(head)
			if err := v.remove(headPrefix + k); err != nil {
				return err
			}
			if err := removeChunks(v, k, c.gen); err != nil {
				return err
			}
		}
		return nil
	})
}

// List implements oauth.Store, sorted by server URL then issuer.
func (s *Store) List(context.Context) ([]*oauth.Entry, error) {
	var out []*oauth.Entry
	err := s.with(func(v vault) error {
		ks, err := keys(v)
		if err != nil {
			return err
		}
		for _, k := range ks {
			e, err := read(v, k)
			if err != nil {
				return err
			}
			if e != nil {
				out = append(out, e)
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].ServerURL != out[j].ServerURL {
			return out[i].ServerURL < out[j].ServerURL
		}
		return out[i].Issuer < out[j].Issuer
	})
	return out, err
}

// Lock implements oauth.Store: the cross-process refresh lock (one for
// all servers, as FileStore's: refreshes are rare and short).
func (s *Store) Lock(ctx context.Context, _ string) (func(), error) {
	return filelock.Lock(ctx, s.lockPath)
}

var _ oauth.Store = (*Store)(nil)
