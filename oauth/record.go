package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNilEntry is returned by MarshalEntry for a nil entry.
var ErrNilEntry = errors.New("oauth: nil entry")

// MarshalEntry returns the stored form of e, secrets included: the JSON
// record that FileStore keeps for one entry. Stores that keep each entry
// as an opaque blob under its own key (the OS secret stores of package
// oauth/secretstore) use it, so every field an Entry gains is carried by
// every store. The bytes are secret: never log them.
func MarshalEntry(e *Entry) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("oauth store: %w", ErrNilEntry)
	}
	return json.Marshal(recordOf(e))
}

// UnmarshalEntry reads an entry back from MarshalEntry's form.
func UnmarshalEntry(b []byte) (*Entry, error) {
	var fe fileEntry
	if err := json.Unmarshal(b, &fe); err != nil {
		return nil, fmt.Errorf("oauth store: a stored entry is not valid: %w", err)
	}
	return fe.entry(), nil
}

// recordOf converts e to its stored form.
func recordOf(e *Entry) fileEntry {
	fe := fileEntry{ServerURL: e.ServerURL, Issuer: e.Issuer, Scope: e.Scope, UpdatedAt: e.UpdatedAt}
	if c := e.Client; c != nil {
		fe.Client = &fileClient{ClientID: c.ClientID, ClientSecret: c.ClientSecret, AuthMethod: c.AuthMethod,
			Source: c.Source, RedirectURIs: c.RedirectURIs, SecretExpiresAt: c.SecretExpiresAt}
	}
	if t := e.Token; t != nil {
		fe.Token = &fileToken{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken,
			Scope: t.Scope, Expiry: t.Expiry, ExpiryAssumed: t.ExpiryAssumed, DPoPKey: t.DPoPKey}
	}
	return fe
}

// entry converts a stored record back to an Entry.
func (fe fileEntry) entry() *Entry {
	e := &Entry{ServerURL: fe.ServerURL, Issuer: fe.Issuer, Scope: fe.Scope, UpdatedAt: fe.UpdatedAt}
	if c := fe.Client; c != nil {
		e.Client = &ClientInfo{ClientID: c.ClientID, ClientSecret: c.ClientSecret, AuthMethod: c.AuthMethod,
			Source: c.Source, RedirectURIs: c.RedirectURIs, SecretExpiresAt: c.SecretExpiresAt}
	}
	if t := fe.Token; t != nil {
		e.Token = &Token{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken,
			Scope: t.Scope, Expiry: t.Expiry, ExpiryAssumed: t.ExpiryAssumed, DPoPKey: t.DPoPKey}
	}
	return e
}
