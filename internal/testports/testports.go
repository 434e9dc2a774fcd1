// Package testports picks loopback ports for the processes a test starts
// (cluster members, mocks) that must be told their ports in advance.
//
// A port the kernel hands out for "127.0.0.1:0" and the test then closes
// is an ephemeral port: any outgoing connection of the machine (another
// test package running in parallel, a benchmark with thousands of
// connections) may take it before the test's process binds it ("address
// already in use"). Free picks ports below the ephemeral ranges of
// Linux (32768–60999), macOS and Windows (49152–65535), where only
// listeners that ask for that port by number land, and checks that each
// is free now.
package testports

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// The range Free picks from.
const (
	low  = 20000
	high = 32768 // exclusive
)

// Free returns n distinct loopback ports that were free a moment ago,
// outside the ephemeral range. It fails the test when it cannot find
// them in a few hundred tries.
func Free(t testing.TB, n int) []int {
	t.Helper()
	seen := map[int]bool{}
	var ports []int
	for try := 0; len(ports) < n; try++ {
		if try > 200*n {
			t.Fatalf("testports: found only %d free ports of %d in [%d, %d)", len(ports), n, low, high)
		}
		p := low + rand.IntN(high-low)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	return ports
}
