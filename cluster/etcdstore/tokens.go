package etcdstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/mcpvisor/mcpvisor/oauth"
)

// TokenStore is an oauth.Store in etcd. Every process with a TokenStore
// on the same etcd and prefix sees the same credentials, and Lock is an
// etcd lock (a key under a lease): refreshes of one server's tokens are
// serialised across all of them, so a rotating refresh token is spent
// once (oauth.Source re-reads the entry after taking the lock). A holder
// that dies releases the lock when its lease expires (Options.LockTTL).
//
// Keys: <prefix>/oauth/entry/<server URL>/<issuer> (each base64url) hold
// an entry (oauth.MarshalEntry: secret); <prefix>/oauth/lock/<server
// URL> the locks.
//
// Concurrency: safe for concurrent use.
type TokenStore struct {
	c    *clientv3.Client
	opts Options
}

var _ oauth.Store = (*TokenStore)(nil)

// NewTokenStore returns the TokenStore on c (which the caller closes).
func NewTokenStore(c *clientv3.Client, o Options) *TokenStore {
	return &TokenStore{c: c, opts: o.withDefaults()}
}

func (s *TokenStore) serverPrefix(serverURL string) string {
	return s.opts.Prefix + "/oauth/entry/" + keyPart(serverURL) + "/"
}

func (s *TokenStore) entryKey(serverURL, issuer string) string {
	return s.serverPrefix(serverURL) + keyPart(issuer)
}

// Load implements oauth.Store: the entry of serverURL and issuer, or with
// an empty issuer the server's most recently updated one; nil when none.
func (s *TokenStore) Load(ctx context.Context, serverURL, issuer string) (*oauth.Entry, error) {
	var resp *clientv3.GetResponse
	var err error
	if issuer != "" {
		resp, err = s.c.Get(ctx, s.entryKey(serverURL, issuer))
	} else {
		resp, err = s.c.Get(ctx, s.serverPrefix(serverURL), clientv3.WithPrefix())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var best *oauth.Entry
	for _, kv := range resp.Kvs {
		e, err := oauth.UnmarshalEntry(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: the entry at %s: %w", kv.Key, err)
		}
		if best == nil || e.UpdatedAt.After(best.UpdatedAt) {
			best = e
		}
	}
	return best, nil
}

// Save implements oauth.Store.
func (s *TokenStore) Save(ctx context.Context, e *oauth.Entry) error {
	b, err := oauth.MarshalEntry(e)
	if err != nil {
		return err
	}
	if _, err := s.c.Put(ctx, s.entryKey(e.ServerURL, e.Issuer), string(b)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Delete implements oauth.Store.
func (s *TokenStore) Delete(ctx context.Context, serverURL, issuer string) error {
	var err error
	if issuer != "" {
		_, err = s.c.Delete(ctx, s.entryKey(serverURL, issuer))
	} else {
		_, err = s.c.Delete(ctx, s.serverPrefix(serverURL), clientv3.WithPrefix())
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// List implements oauth.Store, sorted by server URL then issuer.
func (s *TokenStore) List(ctx context.Context) ([]*oauth.Entry, error) {
	resp, err := s.c.Get(ctx, s.opts.Prefix+"/oauth/entry/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]*oauth.Entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		e, err := oauth.UnmarshalEntry(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: the entry at %s: %w", kv.Key, err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ServerURL != out[j].ServerURL {
			return out[i].ServerURL < out[j].ServerURL
		}
		return out[i].Issuer < out[j].Issuer
	})
	return out, nil
}

// Lock implements oauth.Store: the etcd lock of serverURL, held under a
// lease of its own that this process keeps alive until unlock. The wait
// ends with ctx.
func (s *TokenStore) Lock(ctx context.Context, serverURL string) (func(), error) {
	lease, err := s.c.Grant(ctx, int64(s.opts.LockTTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// The session's keep-alive runs until unlock, not until ctx ends.
	sess, err := concurrency.NewSession(s.c, concurrency.WithLease(lease.ID), concurrency.WithContext(context.Background()))
	if err != nil {
		s.revoke(lease.ID)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	m := concurrency.NewMutex(sess, s.opts.Prefix+"/oauth/lock/"+keyPart(serverURL))
	if err := m.Lock(ctx); err != nil {
		_ = sess.Close() // revokes the lease, and with it the waiter's key
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Closing the session revokes the lease, which deletes the
			// lock's key even if the Unlock below fails.
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = m.Unlock(uctx)
			_ = sess.Close()
		})
	}, nil
}

func (s *TokenStore) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.c.Revoke(ctx, id)
}
