package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// SessionExtras are what a sealed session gains after initialize, which
// its id cannot carry: they follow it to another replica through the
// SessionStore, and are set up again there (the log level; the
// subscriptions, through Options.OnSessionRestored).
type SessionExtras struct {
	LogLevel      protocol.LoggingLevel `json:"logLevel,omitempty"`
	Subscriptions []string              `json:"subscriptions,omitempty"`
}

// SessionRecord is what a SessionStore knows of one session.
type SessionRecord struct {
	// Deleted: the session ended (DELETE, or evicted by a replica). A
	// deleted session stays deleted: later extras do not revive it.
	Deleted bool
	Extras  SessionExtras
}

// SessionStore keeps what the replicas that share a seal key must agree
// on about a sealed session, by the id's random part: whether it was
// deleted (a deny list), and its extras. Each record may be forgotten
// after its until (the session's id has expired by then).
//
// Implementations are safe for concurrent use, and honour ctx.
// MemorySessionStore serves one process; DirSessionStore the processes
// that share a directory; the etcd store (package cluster/etcdstore) a cluster.
type SessionStore interface {
	// Load returns what the store knows of session id (the zero record
	// when nothing).
	Load(ctx context.Context, id string) (SessionRecord, error)
	// SaveExtras records the extras of session id.
	SaveExtras(ctx context.Context, id string, x SessionExtras, until time.Time) error
	// Delete records that session id ended.
	Delete(ctx context.Context, id string, until time.Time) error
}

// SessionStorePruner is implemented by a SessionStore that forgets its
// expired records when asked (the Server asks with ExpireIdle).
type SessionStorePruner interface {
	Prune(ctx context.Context, now time.Time) error
}

// MemorySessionStore is a SessionStore in this process's memory: it
// serves a single replica, and is forgotten when the process ends. The
// zero value is ready.
//
// Concurrency: safe for concurrent use; mu guards recs.
type MemorySessionStore struct {
	mu   sync.Mutex
	recs map[string]memoryRecord // guarded by mu
}

type memoryRecord struct {
	rec   SessionRecord
	until time.Time
}

// Load implements SessionStore.
func (m *MemorySessionStore) Load(_ context.Context, id string) (SessionRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[id].rec
	r.Extras.Subscriptions = append([]string(nil), r.Extras.Subscriptions...)
	return r, nil
}

// SaveExtras implements SessionStore.
func (m *MemorySessionStore) SaveExtras(_ context.Context, id string, x SessionExtras, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recLocked(id)
	x.Subscriptions = append([]string(nil), x.Subscriptions...)
	r.rec.Extras, r.until = x, later(r.until, until)
	m.recs[id] = r
	return nil
}

// Delete implements SessionStore.
func (m *MemorySessionStore) Delete(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recLocked(id)
	r.rec.Deleted, r.until = true, later(r.until, until)
	m.recs[id] = r
	return nil
}

// Prune implements SessionStorePruner.
func (m *MemorySessionStore) Prune(_ context.Context, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, r := range m.recs {
		if now.After(r.until) {
			delete(m.recs, id)
		}
	}
	return nil
}

func (m *MemorySessionStore) recLocked(id string) memoryRecord {
	if m.recs == nil {
		m.recs = map[string]memoryRecord{}
	}
	return m.recs[id]
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
