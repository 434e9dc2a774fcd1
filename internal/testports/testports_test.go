package testports

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFreePortsAreDistinctBindableAndOutsideTheEphemeralRange: every port
// Free returns can be listened on, none twice, all below 32768.
func TestFreePortsAreDistinctBindableAndOutsideTheEphemeralRange(t *testing.T) {
	ports := Free(t, 20)
	require.Len(t, ports, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		require.GreaterOrEqual(t, p, low)
		require.Less(t, p, high)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d", p)
		ln.Close()
	}
}
