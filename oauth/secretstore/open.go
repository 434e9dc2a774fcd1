// Package secretstore keeps OAuth credentials in the operating system's
// secret store instead of a plain file: the macOS Keychain, the Windows
// Credential Manager, the Secret Service over D-Bus (GNOME Keyring,
// KWallet, KeePassXC) or the Linux kernel keyring. Open chooses one by
// name or, with "auto", the platform's store where it works, and falls
// back to the file store (oauth.FileStore) where none does, saying why.
//
// Each entry is one secret holding the entry's stored form
// (oauth.MarshalEntry), so every field oauth adds to an entry is kept.
// Refreshes keep the guarantees of oauth.Store across processes: a file
// lock (empty, owner-only) serialises them, and every read goes to the OS
// store. An existing file store migrates on first use: its entries are
// copied in and the file is overwritten and removed, so no refresh token
// stays in plain text on disk.
package secretstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mcpvisor/mcpvisor/oauth"
)

// Backend names.
const (
	// BackendAuto is the platform's OS store where it works (Keychain on
	// macOS, Credential Manager on Windows, the Secret Service on Linux
	// and BSD), else the file. It never chooses keyctl: the kernel keyring
	// forgets everything at reboot.
	BackendAuto = "auto"
	// BackendFile is oauth.FileStore: one JSON file, owner-only.
	BackendFile = "file"
	// BackendSecretService is the freedesktop.org Secret Service over the
	// session D-Bus, in its default collection.
	BackendSecretService = "secret-service"
	// BackendKeyctl is the Linux kernel keyring: the user's persistent
	// keyring (or the user keyring where there is none). Memory only: it
	// is lost at reboot, and the persistent keyring expires after days of
	// disuse (/proc/sys/kernel/keys/persistent_keyring_expiry).
	BackendKeyctl = "keyctl"
	// BackendKeychain is the macOS login keychain (generic passwords,
	// through /usr/bin/security).
	BackendKeychain = "keychain"
	// BackendWinCred is the Windows Credential Manager (generic
	// credentials, persisted on this machine only).
	BackendWinCred = "wincred"
)

// ErrUnknownBackend is returned by Open for a backend name it does not
// know (the message lists those it does).
var ErrUnknownBackend = errors.New("unknown token store backend")

// DefaultService is the name secrets are kept under when
// Options.Service is empty.
const DefaultService = "mcpvisor"

// Options configure Open. File is required; the rest has usable zero
// values.
type Options struct {
	// Backend is one of the Backend names; "" means BackendAuto.
	Backend string
	// File is the file store's path: the store itself for BackendFile,
	// and the file an OS store migrates from on first use.
	File string
	// LockDir holds the OS stores' lock files. Empty: File's directory.
	LockDir string
	// Service names the application in the OS store (the Keychain's
	// service, the Credential Manager's target prefix, the Secret
	// Service's "application" attribute, the kernel keyring's name). Empty:
	// DefaultService. Letters, digits, '.', '_' and '-' only.
	Service string
	// DBusAddress is the session bus of the Secret Service. Empty: the
	// session bus, found the usual way (DBUS_SESSION_BUS_ADDRESS).
	DBusAddress string
}

// Info says which store Open chose and what it did.
type Info struct {
	// Backend is the store in use (never BackendAuto).
	Backend string
	// Where locates it: the file's path, or the OS store's service and
	// collection or keyring.
	Where string
	// Fallback, set when auto chose the file store, says why no OS store
	// was used.
	Fallback string
	// Migrated counts the entries copied from the file store; the file
	// was then removed.
	Migrated int
}

// String describes the store in one line, for logs.
func (i Info) String() string {
	s := i.Backend + " (" + i.Where + ")"
	if i.Fallback != "" {
		s += "; no OS store: " + i.Fallback
	}
	if i.Migrated > 0 {
		s += fmt.Sprintf("; %d entries migrated from the file store", i.Migrated)
	}
	return s
}

// backendSpec is an OS store this build knows.
type backendSpec struct {
	name string
	auto bool // BackendAuto may choose it
	// open returns the function that opens the vault (one connection per
	// use) and a description of where it is.
	open func(o Options) (func() (vault, error), error)
}

// platformBackends are the OS stores of this build, in auto's order of
// preference (each platform file adds its own).
var platformBackends []backendSpec

var serviceName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Names lists the backend names Open accepts on this platform, auto
// first.
func Names() []string {
	out := []string{BackendAuto, BackendFile}
	for _, b := range platformBackends {
		out = append(out, b.name)
	}
	return out
}

// Open returns the token store that o names, with what it chose. With an
// OS store, an existing file at o.File is migrated into it first. An OS
// store named explicitly that cannot be used is an error wrapping
// ErrUnavailable; auto then falls back to the file.
func Open(ctx context.Context, o Options) (oauth.Store, Info, error) {
	if o.File == "" {
		return nil, Info{}, errors.New("secretstore: Options.File is required")
	}
	if o.Backend == "" {
		o.Backend = BackendAuto
	}
	if o.Service == "" {
		o.Service = DefaultService
	}
	if !serviceName.MatchString(o.Service) {
		return nil, Info{}, fmt.Errorf("secretstore: service name %q: letters, digits, '.', '_' and '-' only", o.Service)
	}
	if o.LockDir == "" {
		o.LockDir = filepath.Dir(o.File)
	}
	fileStore := func(fallback string) (oauth.Store, Info, error) {
		return &oauth.FileStore{Path: o.File}, Info{Backend: BackendFile, Where: o.File, Fallback: fallback}, nil
	}
	switch o.Backend {
	case BackendFile:
		return fileStore("")
	case BackendAuto:
		var why []string
		for _, b := range platformBackends {
			if !b.auto {
				continue
			}
			s, err := openBackend(b, o)
			if err != nil {
				why = append(why, err.Error())
				continue
			}
			return finish(ctx, s, o)
		}
		if len(why) == 0 {
			why = append(why, "this platform has none that auto uses")
		}
		return fileStore(strings.Join(why, "; "))
	}
	for _, b := range platformBackends {
		if b.name == o.Backend {
			s, err := openBackend(b, o)
			if err != nil {
				return nil, Info{}, err
			}
			return finish(ctx, s, o)
		}
	}
	if isKnown(o.Backend) {
		return nil, Info{}, fmt.Errorf("secretstore: %w: %s is not available on this platform", ErrUnavailable, o.Backend)
	}
	return nil, Info{}, fmt.Errorf("secretstore: %w %q (known here: %s)", ErrUnknownBackend, o.Backend, strings.Join(Names(), ", "))
}

func isKnown(name string) bool {
	switch name {
	case BackendSecretService, BackendKeyctl, BackendKeychain, BackendWinCred:
		return true
	}
	return false
}

// openBackend makes b's Store and checks that it works: it opens the
// vault and lists it.
func openBackend(b backendSpec, o Options) (*Store, error) {
	open, err := b.open(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", b.name, ErrUnavailable, err)
	}
	v, err := open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", b.name, ErrUnavailable, err)
	}
	defer v.close()
	if _, err := v.names(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", b.name, ErrUnavailable, err)
	}
	return &Store{
		backend:  b.name,
		open:     open,
		lockPath: filepath.Join(o.LockDir, o.Service+"-"+b.name+".lock"),
		where:    v.describe(),
	}, nil
}

// finish migrates the file store into s.
func finish(ctx context.Context, s *Store, o Options) (oauth.Store, Info, error) {
	info := Info{Backend: s.backend, Where: s.where}
	n, err := Migrate(ctx, o.File, s)
	info.Migrated = n
	if err != nil {
		return nil, info, err
	}
	return s, info, nil
}
