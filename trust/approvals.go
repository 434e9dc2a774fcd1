package trust

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Approval is the user's approval of one server entry of an untrusted
// config layer, in one project directory.
type Approval struct {
	// Project is the project directory, absolute (symbolic links
	// resolved when they could be).
	Project string `json:"project"`
	// Server is the server's name in the project's config.
	Server string `json:"server"`
	// Hash is EntryHash of the entry approved.
	Hash string `json:"hash"`
	// Entry is the entry as written (before ${VAR} expansion), for the
	// user to see what was approved.
	Entry json.RawMessage `json:"entry,omitempty"`
	// Launch is what the server launched with when the user approved it:
	// the entry after every default, layer and expansion, with its env
	// files read and its paths resolved. Nil (an approval recorded before
	// launches were covered) approves no launch: the entry asks again.
	Launch *Launch `json:"launch,omitempty"`
	// ApprovedAt is when the user approved it.
	ApprovedAt time.Time `json:"approvedAt"`
}

// approvalsFile is the format of approvals.json.
type approvalsFile struct {
	Version   int        `json:"version"`
	Approvals []Approval `json:"approvals"`
}

func (s *Store) approvalsPath() string { return filepath.Join(s.dir, "approvals.json") }

// Approvals returns every approval, sorted by project, then server.
func (s *Store) Approvals() ([]Approval, error) {
	var f approvalsFile
	if _, err := readJSON(s.approvalsPath(), &f); err != nil {
		return nil, err
	}
	return f.Approvals, nil
}

// Approved reports whether the user approved the entry whose EntryHash is
// hash for server in project. When not, changed reports whether another
// version of the entry was approved (the entry changed since).
func (s *Store) Approved(project, server, hash string) (approved, changed bool, err error) {
	all, err := s.Approvals()
	if err != nil {
		return false, false, err
	}
	for _, a := range all {
		if a.Project == project && a.Server == server {
			return a.Hash == hash, a.Hash != hash, nil
		}
	}
	return false, false, nil
}

// ApprovedLaunch reports whether the approval of server in project
// covers launch (the same Digest). When not, recorded is the launch the
// approval covers (nil when there is none, or the approval predates
// launches), to show what changed (DiffLaunch).
func (s *Store) ApprovedLaunch(project, server string, launch Launch) (approved bool, recorded *Launch, err error) {
	all, err := s.Approvals()
	if err != nil {
		return false, nil, err
	}
	for _, a := range all {
		if a.Project == project && a.Server == server {
			return a.Launch != nil && a.Launch.Digest == launch.Digest, a.Launch, nil
		}
	}
	return false, nil, nil
}

// Approve records a, replacing any earlier approval of the same server in
// the same project. ApprovedAt, when zero, is set to now.
func (s *Store) Approve(ctx context.Context, a Approval) error {
	if a.Project == "" || a.Server == "" || a.Hash == "" {
		return fmt.Errorf("trust: an approval needs a project, a server and a hash")
	}
	if a.ApprovedAt.IsZero() {
		a.ApprovedAt = s.now()
	}
	return s.modify(ctx, filepath.Join(s.dir, ".approvals.lock"), func() error {
		var f approvalsFile
		if _, err := readJSON(s.approvalsPath(), &f); err != nil {
			return err
		}
		f.Version = fileVersion
		f.Approvals = slices.DeleteFunc(f.Approvals, func(b Approval) bool {
			return b.Project == a.Project && b.Server == a.Server
		})
		f.Approvals = append(f.Approvals, a)
		slices.SortFunc(f.Approvals, func(x, y Approval) int {
			if c := strings.Compare(x.Project, y.Project); c != 0 {
				return c
			}
			return strings.Compare(x.Server, y.Server)
		})
		return writeJSON(s.approvalsPath(), f)
	})
}

// EntryHash identifies a server entry as written: "sha256:" and the hex
// SHA-256 of its canonical JSON (members sorted by name, no insignificant
// space, numbers as written). Any change of a member, an argument or a
// ${VAR} reference changes it; reformatting the file does not.
func EntryHash(raw json.RawMessage) (string, error) {
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Canonical returns raw re-encoded canonically: object members sorted by
// name, no insignificant white space, numbers kept as written.
func Canonical(raw json.RawMessage) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("trust: more than one JSON value")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
