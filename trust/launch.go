package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Launch is what an approval covers of how a server is launched: every
// member of its effective config (after defaults, layers and expansion,
// env files merged, paths resolved to real paths) as one field each.
type Launch struct {
	// Digest is "sha256:" and the hex SHA-256 of Fields, sorted by name:
	// two launches are the same when their digests are.
	Digest string `json:"digest"`
	// Fields maps each member (a path such as "sandbox.write[0]" or
	// "env.PATH") to its value: shown as it is when it cannot hold a
	// secret (paths, the command, the sandbox's members, the trust level),
	// otherwise as "sha256:" and the first 16 hex digits of its SHA-256
	// (values of env and headers, arguments, the URL), so that the state
	// directory never holds a secret the entry expanded.
	Fields map[string]string `json:"fields"`
}

// NewLaunch returns the launch of fields, with its Digest.
func NewLaunch(fields map[string]string) Launch {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		// Length-prefixed, so that no two field sets share an encoding.
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(fields[k]), fields[k])
	}
	return Launch{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Fields: fields}
}

// HiddenValue is how Launch.Fields shows a value that may be a secret.
func HiddenValue(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// DiffLaunch lists, one line each, the fields that differ between the
// launch was (nil: none recorded) and the launch now, sorted: "name:
// old → new", "name: added (value)", "name: removed (was value)".
// Hidden values show as their short digests.
func DiffLaunch(was *Launch, now Launch) []string {
	if was == nil {
		return []string{"no launch was recorded with the approval (it predates them): approve the launch shown"}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(now.Fields)) {
		old, ok := was.Fields[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: added (%s)", k, now.Fields[k]))
		case old != now.Fields[k]:
			out = append(out, fmt.Sprintf("%s: %s → %s", k, old, now.Fields[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(was.Fields)) {
		if _, ok := now.Fields[k]; !ok {
			out = append(out, fmt.Sprintf("%s: removed (was %s)", k, was.Fields[k]))
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		ka, _, _ := strings.Cut(a, ": ")
		kb, _, _ := strings.Cut(b, ": ")
		return strings.Compare(ka, kb)
	})
	return out
}
