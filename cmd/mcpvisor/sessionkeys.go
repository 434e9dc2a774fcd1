package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor/cluster/etcdstore"
	"github.com/mcpvisor/mcpvisor/mcpserver"
)

// sessionKeyFile is the format of --session-keys (docs/sessions.md):
//
//	{"keys": [
//	  {"secret": "<base64 of 32 random bytes>"},
//	  {"secret": "<the previous key>", "acceptUntil": "2026-12-01T00:00:00Z"}
//	],
//	 "maxAge": "24h"}
//
// The first key seals new session ids; the others only open ids until
// their acceptUntil (key rotation). maxAge bounds a session's life.
type sessionKeyFile struct {
	Keys []struct {
		Secret      string    `json:"secret"`
		AcceptUntil time.Time `json:"acceptUntil,omitzero"`
	} `json:"keys"`
	MaxAge string `json:"maxAge,omitempty"`
}

// errSessionKeys: --session-keys names a file that is not a usable key
// file. The message never holds a key.
var errSessionKeys = errors.New("session keys")

// loadSessionSeal reads the key file at path and returns the gateway's
// seal options, with store as the SessionStore.
func loadSessionSeal(path string, store mcpserver.SessionStore) (mcpserver.SealOptions, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return mcpserver.SealOptions{}, fmt.Errorf("%w: %v", errSessionKeys, err)
	}
	var f sessionKeyFile
	if err := json.Unmarshal(b, &f); err != nil {
		// The JSON error may quote the file: say where, not what.
		return mcpserver.SealOptions{}, fmt.Errorf("%w: %s is not a JSON key file", errSessionKeys, path)
	}
	if len(f.Keys) == 0 {
		return mcpserver.SealOptions{}, fmt.Errorf("%w: %s has no keys", errSessionKeys, path)
	}
	o := mcpserver.SealOptions{Store: store}
	for i, k := range f.Keys {
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k.Secret))
		if err != nil || len(secret) != mcpserver.SealKeySize {
			return mcpserver.SealOptions{}, fmt.Errorf("%w: key %d of %s: want the base64 of %d random bytes (openssl rand -base64 %d)",
				errSessionKeys, i+1, path, mcpserver.SealKeySize, mcpserver.SealKeySize)
		}
		o.Keys = append(o.Keys, mcpserver.SealKey{Secret: secret, AcceptUntil: k.AcceptUntil})
	}
	if f.MaxAge != "" {
		if o.MaxAge, err = time.ParseDuration(f.MaxAge); err != nil || o.MaxAge <= 0 {
			return mcpserver.SealOptions{}, fmt.Errorf("%w: maxAge %q of %s: want a duration such as 24h", errSessionKeys, f.MaxAge, path)
		}
	}
	if _, err := mcpserver.NewSealer(o.Keys, o.MaxAge); err != nil {
		return mcpserver.SealOptions{}, fmt.Errorf("%w: %v", errSessionKeys, err)
	}
	return o, nil
}

// sessionStore returns the SessionStore that --session-store names: ""
// is this process's memory, "etcd" the etcd of --etcd-endpoint, anything
// else the directory where a DirSessionStore keeps its files.
func (a *superviseCmd) sessionStore(spec string) (mcpserver.SessionStore, error) {
	switch spec {
	case "":
		return &mcpserver.MemorySessionStore{}, nil
	case backendEtcd:
		c, err := a.etcd.etcdClient()
		if err != nil {
			return nil, err
		}
		return etcdstore.NewSessionStore(c, etcdstore.Options{Prefix: a.etcd.prefix}), nil
	}
	return &mcpserver.DirSessionStore{Dir: spec}, nil
}
