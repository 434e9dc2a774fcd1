package trust

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// ToolStatus is how a tool a server lists compares with its pin.
type ToolStatus string

// The tool statuses.
const (
	// StatusPinned: the definition is the one pinned.
	StatusPinned ToolStatus = "pinned"
	// StatusFirstSeen: the server had never been seen, so every tool it
	// listed was pinned as it is (trust on first use).
	StatusFirstSeen ToolStatus = "first-seen"
	// StatusChanged: the definition differs from the one pinned.
	StatusChanged ToolStatus = "changed"
	// StatusNew: a tool with no pin, from a server seen before.
	StatusNew ToolStatus = "new"
)

// Unpinned reports whether a tool of this status waits for the user's
// review (changed or new).
func (s ToolStatus) Unpinned() bool { return s == StatusChanged || s == StatusNew }

// ToolCheck is the verdict on one tool a server listed.
type ToolCheck struct {
	// Tool is the server's name for the tool.
	Tool   string
	Status ToolStatus
	// Hash is ToolHash of the definition listed.
	Hash string
	// Diff, for a changed or new tool, says what differs from the pin
	// (see Diff; for a new tool, every member is added).
	Diff string
}

// Pin is the definition of a tool as the user accepted it.
type Pin struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	PinnedAt   time.Time       `json:"pinnedAt"`
}

// pendingPin is a definition a server listed that differs from its pin,
// or a tool without one: what the user is asked to review.
type pendingPin struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	SeenAt     time.Time       `json:"seenAt"`
}

// pinsFile is the format of one server's pins file.
type pinsFile struct {
	Version int    `json:"version"`
	Server  string `json:"server"`
	// Identity is the hash the host gave of what runs (see CheckTools),
	// never the command or URL themselves, which may hold secrets.
	Identity string                `json:"identity"`
	Tools    map[string]Pin        `json:"tools"`
	Pending  map[string]pendingPin `json:"pending,omitempty"`
}

func (s *Store) pinsDir() string { return filepath.Join(s.dir, "tool-pins") }

// PinKey names the pins of server (running identity) in the store: the
// server's name made safe for a file name, and a hash of the name and the
// identity.
func PinKey(server, identity string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + identity))
	var b strings.Builder
	for _, r := range server {
		if b.Len() >= 48 {
			break
		}
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return strings.TrimLeft(b.String(), ".") + "-" + hex.EncodeToString(sum[:6])
}

func (s *Store) pinsPath(key string) string { return filepath.Join(s.pinsDir(), key+".json") }

// pinsLock is the lock of one server's pins file.
func (s *Store) pinsLock(key string) string { return filepath.Join(s.pinsDir(), "."+key+".lock") }

// CheckTools compares the tools a server lists with its pins and records
// what it finds:
//
//   - a server seen for the first time (no pins file) has every tool
//     pinned as listed: StatusFirstSeen;
//   - a tool whose definition hashes as its pin: StatusPinned;
//   - a tool whose definition differs from its pin (StatusChanged), or a
//     tool without a pin (StatusNew), is recorded as pending review
//     (PendingTools) until ApproveTool pins it; the pin is kept.
//
// A pending record of a tool the server no longer lists, or lists again
// as pinned, is dropped. identity stands for what runs under the server's
// name (a hash of its command and arguments, or of its URL): pins are kept
// per name and identity, so that two projects' servers of the same name
// do not share them. Checks are ordered like tools.
func (s *Store) CheckTools(ctx context.Context, server, identity string, tools []protocol.Tool) ([]ToolCheck, error) {
	checks := make([]ToolCheck, len(tools))
	defs := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		defs[i] = Definition(t)
		checks[i] = ToolCheck{Tool: t.Name, Hash: definitionHash(defs[i])}
	}
	key := PinKey(server, identity)
	path := s.pinsPath(key)
	err := s.modify(ctx, s.pinsLock(key), func() error {
		var f pinsFile
		existed, err := readJSON(path, &f)
		if err != nil {
			return err
		}
		now := s.now()
		if !existed {
			f = pinsFile{Version: fileVersion, Server: server, Identity: identity, Tools: make(map[string]Pin, len(tools))}
			for i, t := range tools {
				f.Tools[t.Name] = Pin{Hash: checks[i].Hash, Definition: defs[i], PinnedAt: now}
				checks[i].Status = StatusFirstSeen
			}
			return writeJSON(path, f)
		}
		if f.Tools == nil {
			f.Tools = map[string]Pin{}
		}
		dirty := false
		listed := make(map[string]bool, len(tools))
		for i, t := range tools {
			listed[t.Name] = true
			pin, pinned := f.Tools[t.Name]
			if pinned && pin.Hash == checks[i].Hash {
				checks[i].Status = StatusPinned
				if _, ok := f.Pending[t.Name]; ok {
					delete(f.Pending, t.Name) // back to what the user accepted
					dirty = true
				}
				continue
			}
			checks[i].Status = StatusNew
			if pinned {
				checks[i].Status = StatusChanged
			}
			checks[i].Diff = Diff(pin.Definition, defs[i])
			if p, ok := f.Pending[t.Name]; !ok || p.Hash != checks[i].Hash {
				if f.Pending == nil {
					f.Pending = map[string]pendingPin{}
				}
				f.Pending[t.Name] = pendingPin{Hash: checks[i].Hash, Definition: defs[i], SeenAt: now}
				dirty = true
			}
		}
		for name := range f.Pending {
			if !listed[name] {
				delete(f.Pending, name)
				dirty = true
			}
		}
		if !dirty {
			return nil
		}
		return writeJSON(path, f)
	})
	if err != nil {
		return nil, err
	}
	return checks, nil
}

// PendingTool is a tool definition waiting for the user's review.
type PendingTool struct {
	// Key names the server's pins (PinKey).
	Key    string
	Server string
	Tool   string
	// Status is StatusChanged or StatusNew.
	Status ToolStatus
	// Hash and Definition are the definition the server listed.
	Hash       string
	Definition json.RawMessage
	// Pinned is the pinned definition of a changed tool (nil for a new
	// one).
	Pinned json.RawMessage
	// Diff says what differs (see Diff).
	Diff   string
	SeenAt time.Time
}

// PendingTools returns every tool definition waiting for review, sorted
// by server, then tool.
func (s *Store) PendingTools() ([]PendingTool, error) {
	entries, err := os.ReadDir(s.pinsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	var out []PendingTool
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var f pinsFile
		if _, err := readJSON(s.pinsPath(key), &f); err != nil {
			return nil, err
		}
		for name, p := range f.Pending {
			pt := PendingTool{Key: key, Server: f.Server, Tool: name, Status: StatusNew, Hash: p.Hash, Definition: p.Definition, SeenAt: p.SeenAt}
			if pin, ok := f.Tools[name]; ok {
				pt.Status, pt.Pinned = StatusChanged, pin.Definition
			}
			pt.Diff = Diff(pt.Pinned, pt.Definition)
			out = append(out, pt)
		}
	}
	slices.SortFunc(out, func(a, b PendingTool) int {
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		if c := strings.Compare(a.Tool, b.Tool); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

// ErrNoLongerPending is returned by ApproveTool when the definition shown
// to the user is no longer the one pending (the server changed it again,
// or it was approved or dropped meanwhile): nothing was pinned.
var ErrNoLongerPending = errors.New("trust: that definition is no longer pending review")

// ApproveTool pins the pending definition p (as PendingTools returned it)
// if it is still the one pending, so that the server's next check finds
// the tool pinned.
func (s *Store) ApproveTool(ctx context.Context, p PendingTool) error {
	path := s.pinsPath(p.Key)
	return s.modify(ctx, s.pinsLock(p.Key), func() error {
		var f pinsFile
		existed, err := readJSON(path, &f)
		if err != nil {
			return err
		}
		pending, ok := f.Pending[p.Tool]
		if !existed || !ok || pending.Hash != p.Hash {
			return fmt.Errorf("%w: %s tool %s", ErrNoLongerPending, p.Server, p.Tool)
		}
		if f.Tools == nil {
			f.Tools = map[string]Pin{}
		}
		f.Tools[p.Tool] = Pin{Hash: pending.Hash, Definition: pending.Definition, PinnedAt: s.now()}
		delete(f.Pending, p.Tool)
		return writeJSON(path, f)
	})
}
