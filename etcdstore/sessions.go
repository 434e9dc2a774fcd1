package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor/mcpserver"
)

// SessionStore is an mcpserver.SessionStore in etcd, for gateway
// replicas that seal their sessions (mcpserver.SealOptions.Store): a
// session deleted on one replica is refused by all, and its log level
// and subscriptions follow it. Each record is put under a lease that
// ends when the session's id expires, so etcd forgets it by itself.
//
// Keys: <prefix>/sessions/deleted/<id> and <prefix>/sessions/extras/<id>,
// id being the random part of the sealed id (no secret).
//
// Concurrency: safe for concurrent use.
type SessionStore struct {
	c    *clientv3.Client
	opts Options
}

var _ mcpserver.SessionStore = (*SessionStore)(nil)

// NewSessionStore returns the SessionStore on c (which the caller
// closes).
func NewSessionStore(c *clientv3.Client, o Options) *SessionStore {
	return &SessionStore{c: c, opts: o.withDefaults()}
}

func (s *SessionStore) key(kind, id string) string {
	return s.opts.Prefix + "/sessions/" + kind + "/" + id
}

// Load implements mcpserver.SessionStore, in one read.
func (s *SessionStore) Load(ctx context.Context, id string) (mcpserver.SessionRecord, error) {
	var rec mcpserver.SessionRecord
	resp, err := s.c.Txn(ctx).Then(clientv3.OpGet(s.key("deleted", id)), clientv3.OpGet(s.key("extras", id))).Commit()
	if err != nil {
		return rec, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	rec.Deleted = len(resp.Responses[0].GetResponseRange().Kvs) > 0
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		if err := json.Unmarshal(kvs[0].Value, &rec.Extras); err != nil {
			return rec, fmt.Errorf("etcdstore: the extras of session %s: %w", id, err)
		}
	}
	return rec, nil
}

// SaveExtras implements mcpserver.SessionStore.
func (s *SessionStore) SaveExtras(ctx context.Context, id string, x mcpserver.SessionExtras, until time.Time) error {
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return s.put(ctx, s.key("extras", id), string(b), until)
}

// Delete implements mcpserver.SessionStore.
func (s *SessionStore) Delete(ctx context.Context, id string, until time.Time) error {
	return s.put(ctx, s.key("deleted", id), "1", until)
}

// put writes key under a lease that ends at until (at least a second
// from now).
func (s *SessionStore) put(ctx context.Context, key, value string, until time.Time) error {
	ttl := int64(until.Sub(s.opts.Now()).Seconds()) + 1
	lease, err := s.c.Grant(ctx, max(ttl, 1))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if _, err := s.c.Put(ctx, key, value, clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}
