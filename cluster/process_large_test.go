package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAnOverviewOfThousandsOfServersCrossesMembers: each member's answer
// to an overview carries the status and tools of every server it runs, one
// protobuf message of ~2.3 KB per server with the mock's tools. With 5,000
// servers over two members (~2,500 each) that is over gRPC's default 4 MiB
// receive limit: without a larger limit the stream between the members
// breaks (ResourceExhausted), the other member is "unreachable" and its
// servers are missing (bench/cluster at 10,000 servers found it).
func TestAnOverviewOfThousandsOfServersCrossesMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two member processes with 5,000 servers")
	}
	const servers = 5000
	bin := buildMember(t)
	mockURL := serveMockProcess(t, bin) // not under -race: 5,000 sessions

	log := newEventLog()
	procs := startProcs(t, bin, mockURL, servers, newClusterPorts(t, 2), log)
	log.waitFor(t, "all 5,000 servers ready", 3*time.Minute, func(evs []MemberEvent) bool { return len(readyOn(evs)) == servers })
	for _, p := range procs {
		require.Equal(t, readyOn(log.snapshot()), p.overview(t), "overview from %s", p.id)
	}
}
