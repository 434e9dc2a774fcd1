package mcpserver

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Sealed session ids: with HTTPOptions.Seal, the Mcp-Session-Id of a
// handshake-era HTTP session is not a random handle into this process's
// memory but the session itself — its protocol version, client info and
// capabilities, creation time and a random id — encrypted and
// authenticated with AES-256-GCM under a key every replica shares. A
// replica that does not hold the session (another one created it, or it
// restarted) opens the id and carries on with no new initialize. A client
// can neither read nor forge one: any change of a byte fails the GCM tag.
//
// What changes after initialize (the log level, resource subscriptions)
// cannot go in the id: clients keep the id initialize gave them (the
// official Go SDK fails a session whose id changes), so it is kept in the
// SessionStore under the id's random part, with the deny list of sessions
// that were deleted.

// Seal errors, from Sealer.Open. Over HTTP each is a 404 (the client
// initializes a new session), like any unknown session.
var (
	// ErrSessionIDInvalid: the id is not one this server sealed under a
	// key it accepts (forged, altered, or sealed under a key past its
	// grace period).
	ErrSessionIDInvalid = errors.New("mcpserver: invalid session id")
	// ErrSessionExpired: the id is older than SealOptions.MaxAge.
	ErrSessionExpired = errors.New("mcpserver: session expired")
	// ErrSessionDeleted: the session ended (DELETE) on some replica.
	ErrSessionDeleted = errors.New("mcpserver: session deleted")
)

// SealKeySize is the size of a seal key: AES-256.
const SealKeySize = 32

// DefaultSessionMaxAge is SealOptions.MaxAge's zero value.
const DefaultSessionMaxAge = 24 * time.Hour

// DefaultSessionRecheck is SealOptions.Recheck's zero value.
const DefaultSessionRecheck = 5 * time.Second

// SealKey is one key of a Sealer.
type SealKey struct {
	// Secret is the AES-256 key (SealKeySize random bytes).
	Secret []byte
	// AcceptUntil, on a key other than the first, ends its grace
	// period: ids sealed under it are refused from then on. Zero: no
	// end (the key stays accepted until it is removed).
	AcceptUntil time.Time
}

// SealOptions configure sealed session ids (HTTPOptions.Seal). The zero
// value (no Keys) seals nothing: ids are random handles, as without it.
type SealOptions struct {
	// Keys: the first seals new ids; every key opens ids until its
	// AcceptUntil (key rotation: put the new key first and keep the old
	// one with an AcceptUntil a little past the clients' session
	// lifetime).
	Keys []SealKey
	// MaxAge bounds a session's life from its initialize (default
	// DefaultSessionMaxAge): an older id is refused (404).
	MaxAge time.Duration
	// Store keeps what every replica must know of a session beyond its
	// id: that it was deleted, its log level and subscriptions. Nil: a
	// MemorySessionStore (this process only: another replica does not
	// learn of a DELETE, and a restarted one forgets it).
	Store SessionStore
	// Recheck is how often a session held in memory asks the Store
	// whether another replica deleted it (default
	// DefaultSessionRecheck): a DELETE sent to one replica ends the
	// session on the others within Recheck.
	Recheck time.Duration
	// StoreTimeout bounds each call to the Store (default 2 s); a Store
	// that fails or times out is answered with 503, never waited on.
	StoreTimeout time.Duration
}

func (o SealOptions) withDefaults() SealOptions {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultSessionMaxAge
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultSessionRecheck
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = 2 * time.Second
	}
	if o.Store == nil {
		o.Store = &MemorySessionStore{}
	}
	return o
}

// SealedSession is what a sealed id carries.
type SealedSession struct {
	// ID is the random part (128 bits, hex): the session's name in the
	// SessionStore.
	ID              string                      `json:"id"`
	ProtocolVersion string                      `json:"v"`
	ClientInfo      protocol.Implementation     `json:"ci"`
	Capabilities    protocol.ClientCapabilities `json:"caps"`
	// Created is when initialize opened the session (Unix seconds).
	Created int64 `json:"iat"`
}

// sealFormat is the first byte of a sealed id's binary form.
const sealFormat = 1

// sealAAD binds a sealed id to its use: a ciphertext made for anything
// else under the same key does not open as a session.
var sealAAD = []byte("mcpvisor session id v1")

// Sealer seals and opens session ids (see SealOptions).
//
// Concurrency: safe for concurrent use; immutable after NewSealer.
type Sealer struct {
	keys  []sealerKey
	maxAt time.Duration
}

type sealerKey struct {
	aead  cipher.AEAD
	until time.Time
}

// NewSealer returns the Sealer of keys (the first seals). Each key must
// be SealKeySize bytes.
func NewSealer(keys []SealKey, maxAge time.Duration) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("mcpserver: a sealer needs a key")
	}
	s := &Sealer{maxAt: maxAge}
	for i, k := range keys {
		if len(k.Secret) != SealKeySize {
			return nil, fmt.Errorf("mcpserver: seal key %d is %d bytes, want %d", i+1, len(k.Secret), SealKeySize)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		until := k.AcceptUntil
		if i == 0 {
			until = time.Time{} // the sealing key is always accepted
		}
		s.keys = append(s.keys, sealerKey{aead: aead, until: until})
	}
	return s, nil
}

// Seal returns the id of session st: base64url (no padding) of a format
// byte, a random 96-bit nonce and the AES-GCM ciphertext of st's JSON.
func (s *Sealer) Seal(st SealedSession) (string, error) {
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	aead := s.keys[0].aead
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plain)+aead.Overhead())
	out[0] = sealFormat
	if _, err := rand.Read(out[1:]); err != nil {
		return "", err
	}
	out = aead.Seal(out, out[1:1+aead.NonceSize()], plain, sealAAD)
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns what id carries, as of now: ErrSessionIDInvalid unless a
// key accepted at now opens it, ErrSessionExpired once it is older than
// the max age.
func (s *Sealer) Open(id string, now time.Time) (SealedSession, error) {
	var st SealedSession
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) < 1 || raw[0] != sealFormat {
		return st, ErrSessionIDInvalid
	}
	for _, k := range s.keys {
		if !k.until.IsZero() && !now.Before(k.until) {
			continue
		}
		n := k.aead.NonceSize()
		if len(raw) < 1+n+k.aead.Overhead() {
			return st, ErrSessionIDInvalid
		}
		plain, err := k.aead.Open(nil, raw[1:1+n], raw[1+n:], sealAAD)
		if err != nil {
			continue
		}
		if json.Unmarshal(plain, &st) != nil || st.ID == "" {
			return SealedSession{}, ErrSessionIDInvalid
		}
		if s.maxAt > 0 && now.Sub(time.Unix(st.Created, 0)) > s.maxAt {
			return st, ErrSessionExpired
		}
		return st, nil
	}
	return st, ErrSessionIDInvalid
}

// Expires returns when st's id stops being accepted.
func (s *Sealer) Expires(st SealedSession) time.Time {
	return time.Unix(st.Created, 0).Add(s.maxAt)
}
