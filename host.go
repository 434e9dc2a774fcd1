package mcpvisor

import "github.com/mcpvisor/mcpvisor/channels"

// hostState is what the supervisor keeps for its host outside any actor:
// the channel hub and the permission relay (both safe for concurrent
// use), shared by the Supervisor and every server actor through Options.
type hostState struct {
	hub      *channels.Hub
	relay    *channels.Relay
	roots    *rootsState
	progress *progressRoutes
	subs     *subscriptions
}

func newHostState(opts runOptions) *hostState {
	return &hostState{
		hub:      channels.NewHub(),
		relay:    channels.NewRelay(opts.PermissionTimeout),
		roots:    newRootsState(opts.Roots),
		progress: &progressRoutes{routes: map[string]*progressSink{}},
		subs:     newSubscriptions(),
	}
}

// close ends what the host state holds: every poller, every channel
// inbox.
func (h *hostState) close() {
	h.subs.close()
	h.hub.Close()
}
