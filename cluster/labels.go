package cluster

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrSelector: a server's Nodes selector cannot be placed (more than one
// label, or a label with '/', '=' or ',' in it).
var ErrSelector = errors.New("mcpvisor cluster: bad nodes selector")

// Placement by label rides on protoactor's kinds: a member with label
// k=v also runs the grain kind "mcpserver@k=v", and a server pinned to
// k=v is a grain of that kind. disthash's rendezvous hashing considers
// only the members that run a grain's kind, so a pinned server is placed
// (and re-homed) only on members whose labels match.

// kindOf returns the grain kind of a server with selector nodes.
func kindOf(nodes map[string]string) (string, error) {
	switch len(nodes) {
	case 0:
		return grainKind, nil
	case 1:
		for k, v := range nodes {
			return labelKind(k, v)
		}
	}
	return "", fmt.Errorf("%w: %d labels (at most one)", ErrSelector, len(nodes))
}

// labelKind is the grain kind of label k=v.
func labelKind(k, v string) (string, error) {
	if k == "" || strings.ContainsAny(k+v, "/=,") {
		return "", fmt.Errorf("%w: label %q=%q", ErrSelector, k, v)
	}
	return grainKind + "@" + k + "=" + v, nil
}

// memberKinds returns the grain kinds a member with labels runs.
func memberKinds(labels map[string]string) ([]string, error) {
	kinds := []string{grainKind}
	for k, v := range labels {
		kind, err := labelKind(k, v)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds[1:])
	return kinds, nil
}
