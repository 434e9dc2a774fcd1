package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// admin serves the admin API: GET /status, /metrics and /events. It
// reads the gateway's state through the gateway's own accessors and
// keeps none of its own.
type admin struct{ g *Gateway }

// StatusReport is the body of GET /status.
type StatusReport struct {
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	Sessions int       `json:"sessions"`
	InFlight int64     `json:"inFlight"`
	Tools    int       `json:"tools"`
	// ToolTokens estimates the tokens of the definitions of the tools
	// offered (all servers', deferred ones too): their JSON bytes / 4
	// (EstimateTokens).
	ToolTokens int `json:"toolTokens"`
	// ToolMode is what tools/list offers a client that does not choose:
	// "full" or "search" (Options.ToolMode, ToolsAuto resolved).
	ToolMode string         `json:"toolMode"`
	Servers  []ServerReport `json:"servers"`
	// Excluded are the configured servers that a managed policy keeps
	// from running (for example one with "sandbox": false under
	// "requireSandbox"), by name, with the reason; absent when none.
	Excluded []ExcludedReport `json:"excluded,omitempty"`
	// Channels is the channel message queue of wait_for_channel_message
	// (absent without one).
	Channels *ChannelReport `json:"channels,omitempty"`
	// Skipped are the config layer files the latest load of the
	// configuration left out because they do not load (SetSkipped);
	// absent when none was.
	Skipped []SkippedReport `json:"skipped,omitempty"`
}

// ServerReport is one server in a StatusReport: the supervisor's status
// with the latency percentiles in milliseconds.
type ServerReport struct {
	mcpvisor.ServerStatus
	LatencyP50Ms float64 `json:"latencyP50Ms"`
	LatencyP99Ms float64 `json:"latencyP99Ms"`
	// ToolTokens estimates the tokens of the server's offered tool
	// definitions: their JSON bytes / 4 (EstimateTokens).
	ToolTokens int `json:"toolTokens"`
	// Deferred reports a server configured with "defer": true, whose
	// tools are found by search only.
	Deferred bool `json:"deferred,omitempty"`
}

// Status returns what GET /status serves: the gateway's counts and every
// server's status (asked of the Backend). Safe for concurrent use.
func (g *Gateway) Status() StatusReport {
	st := g.b.Status()
	rep := StatusReport{Version: g.opts.Version, Started: g.started, InFlight: g.requests.inflight.Load(), Servers: make([]ServerReport, 0, len(st)),
		Channels: g.chans.report(), Skipped: g.skipped.reports()}
	rep.Sessions = g.srv.Stats().Sessions
	g.mu.Lock()
	rep.Excluded = g.excluded // replaced whole by SetExcluded, never changed in place
	g.mu.Unlock()
	pool := g.b.Tools()
	deferred := map[string]bool{}
	for _, t := range pool {
		if g.gate.offered(t.Name) {
			rep.Tools++
		}
		if t.Deferred {
			deferred[t.Server] = true
		}
	}
	tokens, total := toolTokens(pool, g.gate.offered)
	rep.ToolTokens = total
	rep.ToolMode = g.search.defaultMode(pool).String()
	for _, s := range st {
		rep.Servers = append(rep.Servers, ServerReport{
			ServerStatus: s,
			LatencyP50Ms: float64(s.Latency.P50) / float64(time.Millisecond),
			LatencyP99Ms: float64(s.Latency.P99) / float64(time.Millisecond),
			ToolTokens:   tokens[s.Name],
			Deferred:     deferred[s.Name] || s.Config.Defer,
		})
	}
	return rep
}

func (a *admin) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(a.g.StatusFor(r.Context()))
}

// serveMetrics serves GET /metrics, the whole gateway's figures, to a
// caller that may use the admin actions (View.Admin); another is refused
// 403.
func (a *admin) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !a.g.ViewOf(r.Context()).Admin() {
		httpError(w, http.StatusForbidden, "forbidden: "+ErrAccessDenied.Error()+": /metrics needs an admin")
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	a.writeMetrics(w)
}

// serveEvents streams the supervisor's event bus as server-sent events:
// each event's id is its sequence number and its data the event as JSON.
// With Last-Event-ID (header, or ?after=) the stream resumes after that
// sequence number (a gap event says when some are no longer remembered);
// without it, it starts with the next event. A caller under access rules
// gets the events of the servers it may use only (View.Event).
func (a *admin) serveEvents(w http.ResponseWriter, r *http.Request) {
	view := a.g.ViewOf(r.Context())
	opts := []mcpvisor.SubscribeOption{mcpvisor.BufferSize(1024)}
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
	events := a.g.b.Subscribe(r.Context(), opts...)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": mcpvisor events\n\n")
	flush(w)
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if !view.Event(ev) {
				continue
			}
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			h := ev.Header()
			id := ""
			if h.Seq != 0 {
				id = strconv.FormatUint(h.Seq, 10)
			}
			writeNamedEvent(w, id, string(h.Type), data)
			flush(w)
		case <-keepalive.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			flush(w)
		case <-r.Context().Done():
			return
		case <-a.g.closed:
			return
		}
	}
}

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
