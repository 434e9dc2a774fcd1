package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DirSessionStore is a SessionStore in a directory that every replica
// reaches (replicas on one machine, or a shared volume with atomic
// rename): per session, a file <id>.deleted once it ended and a file
// <id>.extras with its extras. A deletion and the extras are separate
// files, so a replica saving extras never undoes another's deletion.
// Files are written whole (a temporary file renamed into place) and hold
// no secret: the ids are the random part of sealed ids, which is useless
// without the seal key.
//
// Concurrency: safe for concurrent use, by several processes too.
type DirSessionStore struct {
	// Dir holds the files; it is created (0700) on the first write.
	Dir string
}

// dirRecord is the content of a DirSessionStore file.
type dirRecord struct {
	Until  time.Time      `json:"until"`
	Extras *SessionExtras `json:"extras,omitempty"`
}

// validStoreID reports whether id can name a file: the random part of a
// sealed id is hex.
func validStoreID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.Trim(id, "0123456789abcdef") == ""
}

// Load implements SessionStore.
func (d *DirSessionStore) Load(_ context.Context, id string) (SessionRecord, error) {
	var rec SessionRecord
	if !validStoreID(id) {
		return rec, fmt.Errorf("session store: invalid id %q", id)
	}
	if _, err := os.Stat(filepath.Join(d.Dir, id+".deleted")); err == nil {
		rec.Deleted = true
	} else if !errors.Is(err, os.ErrNotExist) {
		return rec, fmt.Errorf("session store: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(d.Dir, id+".extras"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return rec, nil
	case err != nil:
		return rec, fmt.Errorf("session store: %w", err)
	}
	var dr dirRecord
	if err := json.Unmarshal(b, &dr); err != nil {
		return rec, fmt.Errorf("session store: %s: %w", id, err)
	}
	if dr.Extras != nil {
		rec.Extras = *dr.Extras
	}
	return rec, nil
}

// SaveExtras implements SessionStore.
func (d *DirSessionStore) SaveExtras(_ context.Context, id string, x SessionExtras, until time.Time) error {
	return d.write(id, ".extras", dirRecord{Until: until, Extras: &x})
}

// Delete implements SessionStore.
func (d *DirSessionStore) Delete(_ context.Context, id string, until time.Time) error {
	return d.write(id, ".deleted", dirRecord{Until: until})
}

func (d *DirSessionStore) write(id, suffix string, dr dirRecord) error {
	if !validStoreID(id) {
		return fmt.Errorf("session store: invalid id %q", id)
	}
	b, err := json.Marshal(dr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	tmp, err := os.CreateTemp(d.Dir, "."+id+suffix+".*.tmp")
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer os.Remove(tmp.Name()) // nothing left after the rename
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(d.Dir, id+suffix))
	}
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	return nil
}

// Prune implements SessionStorePruner: it removes the files whose until
// has passed.
func (d *DirSessionStore) Prune(ctx context.Context, now time.Time) error {
	entries, err := os.ReadDir(d.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := e.Name()
		if !strings.HasSuffix(name, ".deleted") && !strings.HasSuffix(name, ".extras") {
			continue
		}
		path := filepath.Join(d.Dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var dr dirRecord
		if json.Unmarshal(b, &dr) == nil && now.After(dr.Until) {
			_ = os.Remove(path)
		}
	}
	return nil
}
