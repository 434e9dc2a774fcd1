package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestASelectorIsOneLabelAndNamesAKind: a server's Nodes selector maps
// to the grain kind that members with that label run; more than one
// label, or characters that would break protoactor's "kind/identity"
// keys, are ErrSelector.
func TestASelectorIsOneLabelAndNamesAKind(t *testing.T) {
	k, err := kindOf(nil)
	require.NoError(t, err)
	require.Equal(t, Kind, k)
	k, err = kindOf(map[string]string{"zone": "a"})
	require.NoError(t, err)
	require.Equal(t, "mcpserver@zone=a", k)
	for _, bad := range []map[string]string{
		{"zone": "a", "gpu": "yes"},
		{"zone": "a/b"},
		{"": "x"},
		{"a=b": "c"},
	} {
		_, err := kindOf(bad)
		require.ErrorIs(t, err, ErrSelector, "%v", bad)
	}
	kinds, err := memberKinds(map[string]string{"zone": "a", "cmd": "uvx"})
	require.NoError(t, err)
	require.Equal(t, []string{Kind, "mcpserver@cmd=uvx", "mcpserver@zone=a"}, kinds)
	_, err = memberKinds(map[string]string{"zone": "a,b"})
	require.ErrorIs(t, err, ErrSelector)
}
