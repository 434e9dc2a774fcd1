package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// maxBatch bounds the events of one "events" frame.
const maxBatch = 256

// streamSnapshot is the first frame of GET /admin/stream (event
// "snapshot"): every server's row and its chart history.
type streamSnapshot struct {
	Now      time.Time `json:"now"`
	Interval int64     `json:"intervalMs"`
	// HistoryLen is how many points a chart holds.
	HistoryLen int                    `json:"historyLen"`
	Servers    []json.RawMessage      `json:"servers"`
	History    map[string][][2]uint64 `json:"history"`
	Gateway    streamGateway          `json:"gateway"`
	Actions    map[string]bool        `json:"actions"`
	Channels   []channelRecord        `json:"channels,omitempty"`
}

// streamGateway is the gateway-wide part of a snapshot or status frame.
type streamGateway struct {
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	Sessions int       `json:"sessions"`
	InFlight int64     `json:"inFlight"`
	Tools    int       `json:"tools"`
	// ToolTokens and ToolMode are StatusReport's: the estimated tokens
	// of the offered tool definitions, and what tools/list offers.
	ToolTokens int    `json:"toolTokens"`
	ToolMode   string `json:"toolMode"`
}

// streamStatus is a later frame (event "status"): the rows that changed
// since the stream last sent them, the servers gone, and, for a tick,
// the new chart point of each server that had calls or errors (the
// others had none).
type streamStatus struct {
	Now     time.Time            `json:"now"`
	Servers []json.RawMessage    `json:"servers,omitempty"`
	Removed []string             `json:"removed,omitempty"`
	Tick    bool                 `json:"tick,omitempty"`
	Point   map[string][2]uint64 `json:"point,omitempty"`
	Gateway *streamGateway       `json:"gateway,omitempty"`
}

// serveStream is the dashboard's one connection (GET /admin/stream, SSE):
// the supervisor's events in batches ("events" frames: a JSON array of
// events as /events sends them one by one; id = the last sequence number
// in the batch; resume with Last-Event-ID or ?after=), interleaved with the feed's
// server rows: a "snapshot" frame first, then a "status" frame whenever
// rows changed or a sample tick passed. The snapshot and status frames
// carry no id, so they do not move the browser's resume cursor.
func (d *Dashboard) serveStream(w http.ResponseWriter, r *http.Request) {
	opts := []mcpvisor.SubscribeOption{mcpvisor.BufferSize(4096)}
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("after")
	}
	if cursor != "" {
		seq, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil {
			httpError(w, http.StatusBadRequest, "Last-Event-ID: want a sequence number")
			return
		}
		opts = append(opts, mcpvisor.FromSequence(seq))
	}
	d.feed.start()
	view := d.site.View(r)
	events := d.site.Backend().Subscribe(r.Context(), opts...)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "retry: 1000\n\n")

	snap, changed := d.feed.latest()
	sent := make(map[string]uint64, len(snap.names)) // server → version sent
	first := streamSnapshot{
		Now: snap.at, Interval: d.opts.SampleInterval.Milliseconds(), HistoryLen: d.opts.History, History: visibleHistory(view, snap.history),
		Gateway: d.gatewayInfo(view), Actions: d.actions(view), Channels: visibleChannels(view, d.feed.channelLog()),
	}
	for _, name := range snap.names {
		if !view.Server(name) {
			continue
		}
		first.Servers = append(first.Servers, snap.encoded[name])
		sent[name] = snap.version[name]
	}
	d.writeFrame(w, "snapshot", first)
	flush(w)
	lastNumber := snap.number

	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	batch := make([]mcpvisor.Event, 0, maxBatch)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			// The events waiting now go as one frame (event "events", a
			// JSON array; id = the last sequence number in it): a burst
			// costs the browser one message per batch, not one per event.
			batch = append(batch[:0], ev)
			for len(batch) < maxBatch {
				more := false
				select {
				case ev, ok = <-events:
					more = ok
				default:
				}
				if !more {
					break
				}
				batch = append(batch, ev)
			}
			if shown := visibleEvents(view, batch); len(shown) > 0 {
				if !d.writeEvents(w, shown) {
					return
				}
				flush(w)
			}
		case <-changed:
			snap, changed = d.feed.latest()
			if snap.number == lastNumber {
				continue
			}
			lastNumber = snap.number
			st := streamStatus{Now: snap.at, Tick: snap.tick, Point: visiblePoint(view, snap.point)}
			if snap.tick {
				info := d.gatewayInfo(view)
				st.Gateway = &info
			}
			for _, name := range snap.names {
				if !view.Server(name) {
					continue
				}
				if v, ok := sent[name]; !ok || v != snap.version[name] {
					st.Servers = append(st.Servers, snap.encoded[name])
					sent[name] = snap.version[name]
				}
			}
			for name := range sent {
				if _, ok := snap.reports[name]; !ok {
					st.Removed = append(st.Removed, name)
					delete(sent, name)
				}
			}
			if len(st.Servers) == 0 && len(st.Removed) == 0 && !st.Tick {
				continue
			}
			d.writeFrame(w, "status", st)
			flush(w)
		case <-keepalive.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			flush(w)
		case <-r.Context().Done():
			return
		case <-d.site.Done():
			return
		}
	}
}

// writeEvents writes one "events" frame; false when the events cannot be
// encoded (never, for the supervisor's events).
func (d *Dashboard) writeEvents(w io.Writer, batch []mcpvisor.Event) bool {
	data, err := json.Marshal(batch)
	if err != nil {
		return false
	}
	var last uint64
	for _, ev := range batch {
		last = max(last, ev.Header().Seq)
	}
	id := ""
	if last != 0 {
		id = strconv.FormatUint(last, 10)
	}
	writeNamedEvent(w, id, "events", data)
	return true
}

func (d *Dashboard) writeFrame(w io.Writer, name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	writeNamedEvent(w, "", name, data)
}

// gatewayInfo is the gateway-wide part of a frame, as the stream's
// caller may see it (gateway.View.Summary).
func (d *Dashboard) gatewayInfo(view *gateway.View) streamGateway {
	s := view.Summary()
	return streamGateway{Version: s.Version, Started: s.Started, Sessions: s.Sessions, InFlight: s.InFlight, Tools: s.Tools,
		ToolTokens: s.ToolTokens, ToolMode: s.ToolMode}
}

// actions says which actions the dashboard offers, by what the Backend
// implements and what the options configure: none but logout to a
// caller that may not use the admin actions (gateway.View.Admin).
func (d *Dashboard) actions(view *gateway.View) map[string]bool {
	admin := view.Admin()
	_, ctl := d.site.Backend().(Controller)
	_, perm := d.site.Backend().(gateway.ChannelSource)
	_, login := d.site.Backend().(gateway.ServerSource)
	ctl, perm, login = ctl && admin, perm && admin, login && admin
	return map[string]bool{
		"reconnect": ctl, "toggle": ctl, "permissions": perm, "login": login,
		"reload": d.opts.Reload != nil && admin, "logout": d.site.TokenRequired(),
	}
}

// writeNamedEvent writes one server-sent event (with an id when id is
// not empty).
func writeNamedEvent(w io.Writer, id, name string, data []byte) {
	b := make([]byte, 0, len(data)+64)
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	_, _ = w.Write(b)
}

// flush sends what w holds.
func flush(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
}
