//go:build linux

package secretstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// keyctlMaxValue is below the "user" key type's payload limit
	// (32,767 bytes).
	keyctlMaxValue = 32000
	// keyPerm grants possessor and owner every right (view, read, write,
	// search, link, setattr): another process of the same user reaches
	// the keys even from another session keyring.
	keyPerm = 0x3f3f0000
)

// kernelKeyring is a vault in a keyring of its own ("mcpvisor:<service>")
// inside the user's persistent keyring, or the user keyring where the
// kernel has no persistent keyrings. Keys are "user" keys named by the
// vault's names. Everything lives in kernel memory: nothing on disk, and
// nothing after a reboot.
type kernelKeyring struct {
	ring  int
	where string
}

func init() {
	platformBackends = append(platformBackends, backendSpec{
		name: BackendKeyctl,
		open: func(o Options) (func() (vault, error), error) {
			return func() (vault, error) { return openKernelKeyring(o.Service) }, nil
		},
	})
}

func openKernelKeyring(service string) (*kernelKeyring, error) {
	base, where := 0, ""
	// The persistent keyring, linked into this process's keyring so that
	// the process possesses it (and what it holds).
	if id, err := unix.KeyctlInt(unix.KEYCTL_GET_PERSISTENT, -1, unix.KEY_SPEC_PROCESS_KEYRING, 0, 0); err == nil {
		base, where = id, "persistent keyring"
	} else if id, err2 := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, true); err2 == nil {
		base, where = id, "user keyring"
	} else {
		return nil, fmt.Errorf("keyctl: no persistent keyring (%v) nor user keyring (%w)", err, err2)
	}
	desc := "mcpvisor:" + service
	ring, err := unix.KeyctlSearch(base, "keyring", desc, 0)
	if errors.Is(err, unix.ENOKEY) {
		ring, err = unix.AddKey("keyring", desc, nil, base)
		if err == nil {
			err = unix.KeyctlSetperm(ring, keyPerm)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("keyctl: keyring %q: %w", desc, err)
	}
	return &kernelKeyring{ring: ring, where: fmt.Sprintf("kernel keyring %q (%d) in the %s", desc, ring, where)}, nil
}

func (k *kernelKeyring) find(name string) (int, error) {
	id, err := unix.KeyctlSearch(k.ring, "user", name, 0)
	if errors.Is(err, unix.ENOKEY) || errors.Is(err, unix.EKEYREVOKED) || errors.Is(err, unix.EKEYEXPIRED) {
		return 0, errNotFound
	}
	return id, err
}

func (k *kernelKeyring) get(name string) ([]byte, error) {
	id, err := k.find(name)
	if err != nil {
		return nil, err
	}
	for {
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("keyctl read: %w", err)
		}
		buf := make([]byte, n)
		m, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("keyctl read: %w", err)
		}
		if m <= n {
			return buf[:m], nil
		}
		// The key grew between the two reads: read again.
	}
}

func (k *kernelKeyring) set(name, _ string, value []byte) error {
	id, err := unix.AddKey("user", name, value, k.ring)
	if errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("keyctl: the user's key quota is full (/proc/sys/kernel/keys/maxbytes): %w", err)
	}
	if err != nil {
		return fmt.Errorf("keyctl add: %w", err)
	}
	return unix.KeyctlSetperm(id, keyPerm)
}

func (k *kernelKeyring) remove(name string) error {
	id, err := k.find(name)
	if errors.Is(err, errNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := unix.KeyctlInt(unix.KEYCTL_UNLINK, id, k.ring, 0, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("keyctl unlink: %w", err)
	}
	return nil
}

func (k *kernelKeyring) names() ([]string, error) {
	var ids []byte
	for {
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, k.ring, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("keyctl read keyring: %w", err)
		}
		ids = make([]byte, n)
		m, err := unix.KeyctlBuffer(unix.KEYCTL_READ, k.ring, ids, 0)
		if err != nil {
			return nil, fmt.Errorf("keyctl read keyring: %w", err)
		}
		if m <= n {
			ids = ids[:m]
			break
		}
	}
	var out []string
	for i := 0; i+4 <= len(ids); i += 4 {
		id := int(int32(binary.NativeEndian.Uint32(ids[i:])))
		d, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, id)
		if err != nil {
			continue // removed meanwhile
		}
		// type;uid;gid;perm;description
		f := strings.SplitN(d, ";", 5)
		if len(f) == 5 && f[0] == "user" {
			out = append(out, f[4])
		}
	}
	return out, nil
}

func (k *kernelKeyring) maxValue() int    { return keyctlMaxValue }
func (k *kernelKeyring) describe() string { return k.where }
func (k *kernelKeyring) close()           {}
