package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestASelectorIsOneLabelAndNamesAKind: a server's Nodes selector maps
// to the grain kind that members with that label run; more than one
// label, or characters that would break protoactor's "kind/identity"
// keys, are ErrSelector.
func TestASelectorIsOneLabelAndNamesAKind(t *testing.T) {
	k, err := kindOf(nil)
	require.NoError(t, err)
	require.Equal(t, grainKind, k)
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
	require.Equal(t, []string{grainKind, "mcpserver@cmd=uvx", "mcpserver@zone=a"}, kinds)
	_, err = memberKinds(map[string]string{"zone": "a,b"})
	require.ErrorIs(t, err, ErrSelector)
}

// TestOverlapsFindsTwoActivationsAtOnce checks the tests' own counter of
// double activations, so that its silence means something.
func TestOverlapsFindsTwoActivationsAtOnce(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	fine := []MemberEvent{
		{Type: MemberActivated, Server: "x", Member: "A", Time: at(0)},
		{Type: MemberReleased, Server: "x", Member: "A", Time: at(1)},
		{Type: MemberActivated, Server: "x", Member: "B", Time: at(2)},
	}
	require.Empty(t, overlaps(fine, nil))
	double := []MemberEvent{
		{Type: MemberActivated, Server: "x", Member: "A", Time: at(0)},
		{Type: MemberActivated, Server: "x", Member: "B", Time: at(2)},
	}
	require.Len(t, overlaps(double, nil), 1)
	// A member killed at 1 s ends its activations then.
	require.Empty(t, overlaps(double, map[string]time.Time{"A": at(1)}))
	require.Len(t, overlaps(double, map[string]time.Time{"A": at(3)}), 1)
}

// TestOverlapsOrdersEventsByTime: events from several processes arrive
// out of order; an overlap is judged on their times.
func TestOverlapsOrdersEventsByTime(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	arrived := []MemberEvent{
		{Type: MemberActivated, Server: "x", Member: "B", Time: at(2)},
		{Type: MemberActivated, Server: "x", Member: "A", Time: at(0)},
		{Type: MemberReleased, Server: "x", Member: "A", Time: at(1)},
	}
	require.Empty(t, overlaps(arrived, nil))
}
