package mcpvisor

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// MaxNameLength is the longest qualified name the pool offers: the limit
// model APIs put on tool names.
const MaxNameLength = 64

// QualifiedName returns the name under which a server's tool (or prompt)
// is offered: mcp__<server>__<tool>, with every character outside
// [A-Za-z0-9_-] replaced by '_'. A name longer than MaxNameLength is cut
// and ends in '_' and eight hex digits of a hash of the server's and the
// tool's own names, so that it stays the same from run to run and differs
// from the shortened names of other tools. (The pool may still rename a
// tool whose name another claimed first; see Collision.)
func QualifiedName(server, tool string) string {
	q := fullName(server, tool)
	if len(q) <= MaxNameLength {
		return q
	}
	return withSuffix(q, nameHash(server, tool, 0))
}

func fullName(server, name string) string {
	return "mcp__" + sanitize(server) + "__" + sanitize(name)
}

// withSuffix cuts q so that q + "_" + suffix fits MaxNameLength, and
// appends it. q is ASCII (sanitized), so any cut is a character boundary.
func withSuffix(q, suffix string) string {
	if keep := MaxNameLength - len(suffix) - 1; len(q) > keep {
		q = q[:keep]
	}
	return q + "_" + suffix
}

// nameHash is eight hex digits identifying (server, name); round n > 0
// gives another, for a name whose first choice was taken.
func nameHash(server, name string, round int) string {
	h := sha256.New()
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(name))
	if round > 0 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(round)))
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

func sanitize(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		if !nameChar(s[i]) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < 0x80 && nameChar(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func nameChar(c byte) bool {
	return c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// namer hands out unique qualified names of one kind (tools or prompts)
// for one pool. Claims come in a fixed order (built-ins, then servers by
// name, then each server's entries by their own name), so the same
// configuration always yields the same names.
type namer struct {
	kind       string
	holders    map[string]holder // name → who claimed it
	collisions []Collision
}

func newNamer(kind string, size int) *namer {
	return &namer{kind: kind, holders: make(map[string]holder, size)}
}

// holder is who claimed a name: a server's entry, or a built-in (server
// empty).
type holder struct{ server, original string }

func (h holder) String() string {
	if h.server == "" {
		return "built-in"
	}
	return h.server + "/" + h.original
}

// claim returns the name of server's entry original: its QualifiedName
// unless someone holds that, else a renamed one (recorded as a
// collision).
func (n *namer) claim(server, original string) string {
	return n.claimPreferred(server, original, QualifiedName(server, original))
}

// claimPreferred is claim with QualifiedName(server, original) already
// computed.
func (n *namer) claimPreferred(server, original, q string) string {
	held, taken := n.holders[q]
	if !taken {
		n.holders[q] = holder{server, original}
		return q
	}
	base := fullName(server, original)
	for round := 1; ; round++ {
		alt := withSuffix(base, nameHash(server, original, round))
		if _, taken := n.holders[alt]; !taken {
			n.holders[alt] = holder{server, original}
			n.collisions = append(n.collisions, Collision{Kind: n.kind, Name: q, Holder: held.String(), Server: server, Original: original, Renamed: alt})
			return alt
		}
	}
}
