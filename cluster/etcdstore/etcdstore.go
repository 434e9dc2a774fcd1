// Package etcdstore keeps in etcd the state that every mcpvisor process
// of a deployment must share: OAuth credentials (TokenStore, an
// oauth.Store), so that a server's token follows it to whichever member
// runs it, and the deny list and extras of sealed gateway sessions
// (SessionStore, an mcpserver.SessionStore), so that a DELETE sent to one
// gateway replica ends the session on all of them.
//
// The caller makes the etcd client (go.etcd.io/etcd/client/v3) with the
// endpoints, TLS and credentials of its cluster, and closes it. Values
// are stored as they are: the tokens are secrets, so the etcd cluster
// must be reachable only by the deployment (TLS, client certificates or
// users, and its data at rest protected as any secret store's).
package etcdstore

import (
	"encoding/base64"
	"errors"
	"strings"
	"time"
)

// ErrUnavailable wraps every failure to reach etcd (errors.Is).
var ErrUnavailable = errors.New("etcdstore: etcd is unavailable")

// DefaultPrefix is Options.Prefix's zero value.
const DefaultPrefix = "/mcpvisor"

// DefaultLockTTL is Options.LockTTL's zero value.
const DefaultLockTTL = 10 * time.Second

// Options configure the stores. The zero value keeps keys under
// DefaultPrefix, with the DefaultLockTTL.
type Options struct {
	// Prefix starts every key (default DefaultPrefix): deployments that
	// share one etcd use different prefixes.
	Prefix string
	// LockTTL is how long a refresh lock outlives a process that died
	// holding it (the TTL of the etcd lease behind it; default
	// DefaultLockTTL, at least a second). A live holder keeps its lease.
	LockTTL time.Duration
	// Now is the clock (default time.Now); the session records' leases
	// run until their session's id expires, as of Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	if o.LockTTL < time.Second {
		o.LockTTL = DefaultLockTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// keyPart encodes a URL or an issuer as one key segment (no '/').
func keyPart(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
