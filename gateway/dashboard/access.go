package dashboard

import (
	"net/http"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// Under the gateway's access rules (gateway.Options.Access) the
// dashboard shows each request's caller what tools/list would: its View
// (gateway.Site.View) filters every data endpoint (GET /admin/pool,
// /admin/channels) and every frame of GET /admin/stream (server rows,
// charts, events, channel messages, the gateway-wide figures), and the
// actions are an admin's (adminOnly). A browser's login cookie (had for
// the gateway's token) is the operator, whom no rule restricts; a caller
// with an access token (e.g. put in by a proxy in front) is judged by
// its identity.

// adminOnly wraps an action: its caller must be allowed the admin
// actions (gateway.View.Admin), and the server it names (path value
// name; a permission request's server) one it may use. Else 403.
// (Reconnecting every server reconnects those the caller may use.)
func (d *Dashboard) adminOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		view := d.site.View(r)
		if !view.Admin() {
			d.site.Rejected()
			httpError(w, http.StatusForbidden, "forbidden: "+gateway.ErrAccessDenied.Error()+": this action needs an admin")
			return
		}
		server, named := r.PathValue("name"), r.PathValue("name") != ""
		if id := r.PathValue("id"); id != "" {
			server, named = d.permissionServer(id)
		}
		if named && !view.Server(server) {
			d.site.Rejected()
			httpError(w, http.StatusForbidden, "forbidden: "+gateway.ErrAccessDenied.Error()+": server "+strings.ReplaceAll(server, "\n", " ")+" is not allowed for this caller")
			return
		}
		next(w, r)
	}
}

// permissionServer returns the server of the pending permission request
// id, and whether there is one.
func (d *Dashboard) permissionServer(id string) (string, bool) {
	src, ok := d.site.Backend().(gateway.ChannelSource)
	if !ok {
		return "", false
	}
	for _, p := range src.Channels().PendingPermissions() {
		if p.ID == id {
			return p.Server, true
		}
	}
	return "", false
}

// visibleChannels keeps of log the messages of the servers view may use
// (never nil).
func visibleChannels(view *gateway.View, log []channelRecord) []channelRecord {
	out := make([]channelRecord, 0, len(log))
	for _, m := range log {
		if view.Server(m.Server) {
			out = append(out, m)
		}
	}
	return out
}

// visibleHistory keeps the charts of the servers view may use.
func visibleHistory(view *gateway.View, h map[string][][2]uint64) map[string][][2]uint64 {
	if view.All() {
		return h
	}
	out := make(map[string][][2]uint64, len(h))
	for name, points := range h {
		if view.Server(name) {
			out[name] = points
		}
	}
	return out
}

// visiblePoint keeps the chart points of the servers view may use.
func visiblePoint(view *gateway.View, p map[string][2]uint64) map[string][2]uint64 {
	if view.All() || p == nil {
		return p
	}
	out := make(map[string][2]uint64, len(p))
	for name, pt := range p {
		if view.Server(name) {
			out[name] = pt
		}
	}
	return out
}

// visibleEvents keeps of batch the events view may see (the batch itself
// when it sees all).
func visibleEvents(view *gateway.View, batch []mcpvisor.Event) []mcpvisor.Event {
	if view.All() {
		return batch
	}
	out := make([]mcpvisor.Event, 0, len(batch))
	for _, ev := range batch {
		if view.Event(ev) {
			out = append(out, ev)
		}
	}
	return out
}
