//go:build windows

package secretstore

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The Credential Manager API of advapi32 (wincred.h), which
// golang.org/x/sys/windows does not wrap.
var (
	advapi32           = windows.NewLazySystemDLL("advapi32.dll")
	procCredReadW      = advapi32.NewProc("CredReadW")
	procCredWriteW     = advapi32.NewProc("CredWriteW")
	procCredDeleteW    = advapi32.NewProc("CredDeleteW")
	procCredEnumerateW = advapi32.NewProc("CredEnumerateW")
	procCredFree       = advapi32.NewProc("CredFree")
)

const (
	credTypeGeneric         = 1
	credPersistLocalMachine = 2
	// credMaxBlob is CRED_MAX_CREDENTIAL_BLOB_SIZE (5 × 512 bytes).
	credMaxBlob = 5 * 512
)

// credential is CREDENTIALW.
type credential struct {
	Flags              uint32
	Type               uint32
	TargetName         *uint16
	Comment            *uint16
	LastWritten        windows.Filetime
	CredentialBlobSize uint32
	CredentialBlob     *byte
	Persist            uint32
	AttributeCount     uint32
	Attributes         uintptr
	TargetAlias        *uint16
	UserName           *uint16
}

// winCred is a vault of generic credentials named "<service>:<name>",
// persisted for the user on this machine (not roaming with the profile).
type winCred struct{ service string }

func init() {
	platformBackends = append(platformBackends, backendSpec{
		name: BackendWinCred, auto: true,
		open: func(o Options) (func() (vault, error), error) {
			if err := procCredEnumerateW.Find(); err != nil {
				return nil, err
			}
			return func() (vault, error) { return &winCred{service: o.Service}, nil }, nil
		},
	})
}

func (w *winCred) target(name string) (*uint16, error) {
	return windows.UTF16PtrFromString(w.service + ":" + name)
}

func (w *winCred) get(name string) ([]byte, error) {
	target, err := w.target(name)
	if err != nil {
		return nil, err
	}
	var c *credential
	r, _, err := procCredReadW.Call(uintptr(unsafe.Pointer(target)), credTypeGeneric, 0, uintptr(unsafe.Pointer(&c)))
	if r == 0 {
		if errors.Is(err, windows.ERROR_NOT_FOUND) {
			return nil, errNotFound
		}
		return nil, fmt.Errorf("CredRead: %w", err)
	}
	defer procCredFree.Call(uintptr(unsafe.Pointer(c)))
	return append([]byte(nil), unsafe.Slice(c.CredentialBlob, c.CredentialBlobSize)...), nil
}

func (w *winCred) set(name, label string, value []byte) error {
	target, err := w.target(name)
	if err != nil {
		return err
	}
	comment, err := windows.UTF16PtrFromString(label)
	if err != nil {
		return err
	}
	user, err := windows.UTF16PtrFromString(w.service)
	if err != nil {
		return err
	}
	c := credential{Type: credTypeGeneric, TargetName: target, Comment: comment, UserName: user,
		Persist: credPersistLocalMachine, CredentialBlobSize: uint32(len(value))}
	if len(value) > 0 {
		c.CredentialBlob = &value[0]
	}
	if r, _, err := procCredWriteW.Call(uintptr(unsafe.Pointer(&c)), 0); r == 0 {
		return fmt.Errorf("CredWrite: %w", err)
	}
	return nil
}

func (w *winCred) remove(name string) error {
	target, err := w.target(name)
	if err != nil {
		return err
	}
	if r, _, err := procCredDeleteW.Call(uintptr(unsafe.Pointer(target)), credTypeGeneric, 0); r == 0 && !errors.Is(err, windows.ERROR_NOT_FOUND) {
		return fmt.Errorf("CredDelete: %w", err)
	}
	return nil
}

func (w *winCred) names() ([]string, error) {
	filter, err := windows.UTF16PtrFromString(w.service + ":*")
	if err != nil {
		return nil, err
	}
	var count uint32
	var creds **credential
	r, _, err := procCredEnumerateW.Call(uintptr(unsafe.Pointer(filter)), 0, uintptr(unsafe.Pointer(&count)), uintptr(unsafe.Pointer(&creds)))
	if r == 0 {
		if errors.Is(err, windows.ERROR_NOT_FOUND) {
			return nil, nil
		}
		return nil, fmt.Errorf("CredEnumerate: %w", err)
	}
	defer procCredFree.Call(uintptr(unsafe.Pointer(creds)))
	var out []string
	for _, c := range unsafe.Slice(creds, count) {
		if c.Type != credTypeGeneric {
			continue
		}
		if n, ok := strings.CutPrefix(windows.UTF16PtrToString(c.TargetName), w.service+":"); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func (w *winCred) maxValue() int { return credMaxBlob }

func (w *winCred) describe() string {
	return fmt.Sprintf("Windows Credential Manager, generic credentials %q", w.service+":*")
}

func (w *winCred) close() {}
