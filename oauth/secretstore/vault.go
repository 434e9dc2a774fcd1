package secretstore

import "errors"

// ErrUnavailable is wrapped by Open when the chosen backend cannot be
// used here (not built for this platform, no session bus, no keyring
// service, a locked keyring the user did not unlock, keyctl blocked by a
// sandbox). The message says why.
var ErrUnavailable = errors.New("secret store unavailable")

// ErrCorrupt is wrapped when a stored record cannot be read back (a
// chunk is missing or not valid). The record is left as it is.
var ErrCorrupt = errors.New("secret store: stored credentials are corrupt")

// errNotFound is a vault's "no such item".
var errNotFound = errors.New("secret store: no such item")

// vault is an OS secret store seen as a flat map of named secrets, all
// under one service name. Names are printable; values are bytes.
type vault interface {
	// get returns the value of name, or errNotFound.
	get(name string) ([]byte, error)
	// set creates or replaces name; label is what a keyring viewer shows.
	set(name, label string, value []byte) error
	// remove deletes name; a missing name is no error.
	remove(name string) error
	// names lists every name of the service.
	names() ([]string, error)
	// maxValue is the largest value set accepts (0: no limit that
	// matters). Records above it are split into chunks.
	maxValue() int
	// describe says where the secrets are, for status output.
	describe() string
	// close releases the vault's connection, if it holds one.
	close()
}
