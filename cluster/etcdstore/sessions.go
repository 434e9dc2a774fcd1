package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor/mcpserver"
)

// SessionStore is an mcpserver.SessionStore in etcd, for gateway
// replicas that seal their sessions (mcpserver.SealOptions.Store): a
// session deleted on one replica is refused by all, and its log level
// and subscriptions follow it. Each record is put under a lease that
// ends after the session's id expires (records whose ids expire within
// the same ten minutes share one), so etcd forgets it by itself.
//
// Keys: <prefix>/sessions/deleted/<id> and <prefix>/sessions/extras/<id>,
// id being the random part of the sealed id (no secret).
//
// Concurrency: safe for concurrent use.
type SessionStore struct {
	c    *clientv3.Client
	opts Options

	mu     sync.Mutex
	leases map[int64]clientv3.LeaseID // by the Unix end of their bucket; guarded by mu
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

// leaseBucket is the span of session expiries that share one lease: a
// record lives up to one bucket longer than its session's id, and the
// store holds one lease per bucket, not one per record.
const leaseBucket = 10 * time.Minute

// put writes key under the lease of until's bucket (which ends at the
// end of that bucket, at least a second from now).
func (s *SessionStore) put(ctx context.Context, key, value string, until time.Time) error {
	for attempt := 0; ; attempt++ {
		lease, err := s.lease(ctx, until)
		if err != nil {
			return err
		}
		_, err = s.c.Put(ctx, key, value, clientv3.WithLease(lease))
		if err == nil {
			return nil
		}
		s.forgetLease(lease)
		if attempt == 1 || !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		// The bucket's lease ended (revoked, or etcd lost it): grant anew.
	}
}

// lease returns the lease of until's bucket, granting it the first time.
func (s *SessionStore) lease(ctx context.Context, until time.Time) (clientv3.LeaseID, error) {
	end := until.Truncate(leaseBucket).Add(leaseBucket)
	s.mu.Lock()
	id, ok := s.leases[end.Unix()]
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	ttl := int64(end.Sub(s.opts.Now()).Seconds()) + 1
	resp, err := s.c.Grant(ctx, max(ttl, 1))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases = map[int64]clientv3.LeaseID{}
	}
	for b := range s.leases { // buckets that have ended
		if time.Unix(b, 0).Before(now) {
			delete(s.leases, b)
		}
	}
	if held, ok := s.leases[end.Unix()]; ok {
		return held, nil // another call granted one meanwhile: ours holds no key and expires by itself
	}
	s.leases[end.Unix()] = resp.ID
	return resp.ID, nil
}

func (s *SessionStore) forgetLease(id clientv3.LeaseID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b, l := range s.leases {
		if l == id {
			delete(s.leases, b)
		}
	}
}
