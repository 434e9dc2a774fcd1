package gateway

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// metrics are the gateway's counters, written by request goroutines and
// the event goroutine, read by /metrics.
type metrics struct {
	mu         sync.Mutex
	calls      map[[2]string]uint64 // (server, outcome) → downstream tools/call count; guarded by mu
	reconnects map[string]uint64    // server → reconnect episodes begun; guarded by mu
	states     map[[2]string]uint64 // (server, state) → transitions into state; guarded by mu
	notes      map[string]uint64    // notification method → deliveries; guarded by mu

	eventsSeen    atomic.Uint64
	eventsDropped atomic.Uint64 // gap events' Dropped, summed
	rejected      atomic.Uint64 // HTTP requests refused by guard

	clientRequests atomic.Uint64 // server requests forwarded to a downstream client
	clientRefused  atomic.Uint64 // server requests no downstream client could answer
}

func (m *metrics) init() {
	m.calls = map[[2]string]uint64{}
	m.reconnects = map[string]uint64{}
	m.states = map[[2]string]uint64{}
	m.notes = map[string]uint64{}
}

// call counts one downstream tools/call; outcome is "ok" or the failure
// kind of its error.
func (m *metrics) call(server string, _ time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(mcpvisor.ClassifyFailure(err))
	}
	m.mu.Lock()
	m.calls[[2]string{server, outcome}]++
	m.mu.Unlock()
}

func (m *metrics) event(ev mcpvisor.Event) {
	m.eventsSeen.Add(1)
	switch ev := ev.(type) {
	case *mcpvisor.GapEvent:
		m.eventsDropped.Add(ev.Dropped)
	case *mcpvisor.ServerStateEvent:
		m.mu.Lock()
		m.states[[2]string{ev.Server, string(ev.State)}]++
		if ev.State == mcpvisor.StateReconnecting && ev.Previous != mcpvisor.StateReconnecting {
			m.reconnects[ev.Server]++
		}
		m.mu.Unlock()
	}
}

func (m *metrics) notified(method string, n int) {
	m.mu.Lock()
	m.notes[method] += uint64(n)
	m.mu.Unlock()
}

var allStates = []mcpvisor.State{mcpvisor.StatePending, mcpvisor.StateConnecting, mcpvisor.StateReady,
	mcpvisor.StateReconnecting, mcpvisor.StateFailed, mcpvisor.StateNeedsAuth, mcpvisor.StateDisabled, mcpvisor.StateStopped,
	mcpvisor.StateNeedsApproval}

// writeMetrics writes every metric in the Prometheus text exposition
// format (version 0.0.4).
func (a *admin) writeMetrics(w io.Writer) {
	st := a.g.b.Status()
	p := &promWriter{w: w}

	p.help("mcpvisor_server_state", "gauge", "1 for the state each server is in.")
	for _, s := range st {
		for _, state := range allStates {
			v := 0.0
			if s.State == state {
				v = 1
			}
			p.sample("mcpvisor_server_state", v, "server", s.Name, "state", string(state))
		}
	}
	p.help("mcpvisor_server_strikes", "gauge", "Consecutive transient errors of the live connection.")
	for _, s := range st {
		p.sample("mcpvisor_server_strikes", float64(s.Strikes), "server", s.Name)
	}
	p.help("mcpvisor_server_attempt", "gauge", "Connect attempts in the current reconnect episode.")
	for _, s := range st {
		p.sample("mcpvisor_server_attempt", float64(s.Attempt), "server", s.Name)
	}
	p.help("mcpvisor_server_tools", "gauge", "Tools the server offers in the pool.")
	for _, s := range st {
		p.sample("mcpvisor_server_tools", float64(s.OfferedTools), "server", s.Name)
	}
	p.help("mcpvisor_server_in_flight", "gauge", "Requests in flight on the server's connection.")
	for _, s := range st {
		p.sample("mcpvisor_server_in_flight", float64(s.InFlight), "server", s.Name)
	}
	p.help("mcpvisor_server_requests_total", "counter", "Requests sent to the server (calls, prompts, reads, pings).")
	for _, s := range st {
		p.sample("mcpvisor_server_requests_total", float64(s.Latency.Calls), "server", s.Name)
	}
	p.help("mcpvisor_server_request_errors_total", "counter", "Requests to the server that ended in an error.")
	for _, s := range st {
		p.sample("mcpvisor_server_request_errors_total", float64(s.Latency.Errors), "server", s.Name)
	}
	p.help("mcpvisor_server_request_duration_seconds", "histogram", "Duration of requests to the server.")
	for _, s := range st {
		var cum uint64
		for i, c := range s.Latency.Counts {
			cum += c
			le := "+Inf"
			if i < len(mcpvisor.LatencyBuckets) {
				le = fmt.Sprint(mcpvisor.LatencyBuckets[i].Seconds())
			}
			p.sample("mcpvisor_server_request_duration_seconds_bucket", float64(cum), "server", s.Name, "le", le)
		}
		p.sample("mcpvisor_server_request_duration_seconds_sum", s.Latency.Sum.Seconds(), "server", s.Name)
		p.sample("mcpvisor_server_request_duration_seconds_count", float64(s.Latency.Calls), "server", s.Name)
	}

	a.g.metrics.mu.Lock()
	calls := maps.Clone(a.g.metrics.calls)
	reconnects := maps.Clone(a.g.metrics.reconnects)
	states := maps.Clone(a.g.metrics.states)
	notes := maps.Clone(a.g.metrics.notes)
	a.g.metrics.mu.Unlock()

	p.help("mcpvisor_gateway_tool_calls_total", "counter",
		"Downstream tools/call by server and outcome: ok, or the error's failure class (transient, closed, session-expired, auth, config, protocol, call).")
	for _, k := range slices.SortedFunc(maps.Keys(calls), cmpPair) {
		p.sample("mcpvisor_gateway_tool_calls_total", float64(calls[k]), "server", k[0], "outcome", k[1])
	}
	p.help("mcpvisor_server_reconnects_total", "counter", "Reconnect episodes begun (the connection was lost or a connect failed).")
	for _, k := range slices.Sorted(maps.Keys(reconnects)) {
		p.sample("mcpvisor_server_reconnects_total", float64(reconnects[k]), "server", k)
	}
	p.help("mcpvisor_server_state_transitions_total", "counter", "Transitions into each state.")
	for _, k := range slices.SortedFunc(maps.Keys(states), cmpPair) {
		p.sample("mcpvisor_server_state_transitions_total", float64(states[k]), "server", k[0], "state", k[1])
	}
	p.help("mcpvisor_gateway_notifications_total", "counter", "Notifications sent downstream, by method.")
	for _, k := range slices.Sorted(maps.Keys(notes)) {
		p.sample("mcpvisor_gateway_notifications_total", float64(notes[k]), "method", k)
	}
	p.help("mcpvisor_events_total", "counter", "Events the gateway read from the supervisor's event bus.")
	p.sample("mcpvisor_events_total", float64(a.g.metrics.eventsSeen.Load()))
	p.help("mcpvisor_events_dropped_total", "counter", "Events the gateway's bus subscription lost (reported by gap events).")
	p.sample("mcpvisor_events_dropped_total", float64(a.g.metrics.eventsDropped.Load()))
	p.help("mcpvisor_gateway_rejected_requests_total", "counter", "HTTP requests refused (Host, Origin or token).")
	p.sample("mcpvisor_gateway_rejected_requests_total", float64(a.g.metrics.rejected.Load()))
	srv := a.g.srv.Stats()
	p.help("mcpvisor_gateway_cancelled_requests_total", "counter", "Downstream requests the client cancelled.")
	p.sample("mcpvisor_gateway_cancelled_requests_total", float64(srv.Cancelled))
	p.help("mcpvisor_gateway_sse_polls_total", "counter", "Long calls whose POST event stream was closed for the client to resume with Last-Event-ID (SEP-1699).")
	p.sample("mcpvisor_gateway_sse_polls_total", float64(srv.Polled))
	p.help("mcpvisor_gateway_server_requests_total", "counter", "Server requests to the client (sampling, elicitation, roots) by outcome: forwarded to a downstream client, or refused for want of one.")
	p.sample("mcpvisor_gateway_server_requests_total", float64(a.g.metrics.clientRequests.Load()), "outcome", "forwarded")
	p.sample("mcpvisor_gateway_server_requests_total", float64(a.g.metrics.clientRefused.Load()), "outcome", "refused")
	parked := a.g.InputsWaiting()
	p.help("mcpvisor_gateway_input_rounds_waiting", "gauge", "input_required answers given to 2026-07-28 clients whose retry has not come yet.")
	p.sample("mcpvisor_gateway_input_rounds_waiting", float64(parked))
	p.help("mcpvisor_gateway_input_calls", "gauge", "Calls of 2026-07-28 clients running behind the gateway that may need their input.")
	p.sample("mcpvisor_gateway_input_calls", float64(a.g.inputs.calls.Load()))
	p.help("mcpvisor_gateway_sessions", "gauge", "Downstream sessions (HTTP and stdio).")
	p.sample("mcpvisor_gateway_sessions", float64(srv.Sessions))
	p.help("mcpvisor_gateway_sessions_evicted_total", "counter", "HTTP sessions evicted, longest idle first, to stay within the session cap.")
	p.sample("mcpvisor_gateway_sessions_evicted_total", float64(srv.SessionsEvicted))
	p.help("mcpvisor_gateway_sessions_evicted_memory_total", "counter", "HTTP sessions evicted, longest idle first, to keep what all sessions hold within the byte bound (counted in mcpvisor_gateway_sessions_evicted_total too).")
	p.sample("mcpvisor_gateway_sessions_evicted_memory_total", float64(srv.EvictedForBytes))
	p.help("mcpvisor_gateway_session_state_bytes", "gauge", "Bytes the downstream sessions hold together: client info, capabilities, subscriptions and listen filters, and 2 KiB per open session.")
	p.sample("mcpvisor_gateway_session_state_bytes", float64(srv.Retained))
	p.help("mcpvisor_gateway_session_state_limit_bytes", "gauge", "The byte bounds: per session (client info, capabilities, subscriptions) and for all sessions together; 0: none.")
	p.sample("mcpvisor_gateway_session_state_limit_bytes", float64(srv.MaxSessionState), "bound", "session")
	p.sample("mcpvisor_gateway_session_state_limit_bytes", float64(srv.MaxRetained), "bound", "total")
	p.help("mcpvisor_gateway_session_state_refused_total", "counter", "Requests refused because what they would make the gateway keep passes a byte bound (per session, or for all sessions).")
	p.sample("mcpvisor_gateway_session_state_refused_total", float64(srv.StateRefused), "bound", "session")
	p.sample("mcpvisor_gateway_session_state_refused_total", float64(srv.RetainedRefused), "bound", "total")
	p.help("mcpvisor_gateway_body_timeouts_total", "counter", "POSTs answered 408 because their body did not arrive within the body timeout.")
	p.sample("mcpvisor_gateway_body_timeouts_total", float64(srv.BodyTimeouts))
	p.help("mcpvisor_gateway_streams_refused_total", "counter", "GET streams refused (409) because their session had the most it may have open.")
	p.sample("mcpvisor_gateway_streams_refused_total", float64(srv.StreamsRefused))
	p.help("mcpvisor_gateway_listen_streams", "gauge", "Open subscriptions/listen streams (2026-07-28 clients).")
	p.sample("mcpvisor_gateway_listen_streams", float64(srv.Listens))
	p.help("mcpvisor_gateway_in_flight", "gauge", "Downstream requests being served.")
	p.sample("mcpvisor_gateway_in_flight", float64(a.g.requests.inflight.Load()))
	a.g.chans.writeMetrics(p)
	a.g.trail.writeAuditMetrics(p)
}

// writeMetrics writes the counters of the channel message queue
// (wait_for_channel_message), per server.
func (cw *channelWaits) writeMetrics(p *promWriter) {
	if cw.inbox == nil {
		return
	}
	servers := cw.inbox.ServerStats()
	p.help("mcpvisor_gateway_channel_messages_total", "counter",
		"Channel messages per server by outcome: queued (received), delivered (taken by wait_for_channel_message), dropped (the server's queue was full; oldest first).")
	for _, s := range servers {
		p.sample("mcpvisor_gateway_channel_messages_total", float64(s.Received), "server", s.Server, "outcome", "queued")
		p.sample("mcpvisor_gateway_channel_messages_total", float64(s.Taken), "server", s.Server, "outcome", "delivered")
		p.sample("mcpvisor_gateway_channel_messages_total", float64(s.Dropped), "server", s.Server, "outcome", "dropped")
	}
	p.help("mcpvisor_gateway_channel_queued", "gauge", "Channel messages waiting for wait_for_channel_message, per server.")
	for _, s := range servers {
		p.sample("mcpvisor_gateway_channel_queued", float64(s.Queued), "server", s.Server)
	}
}

func cmpPair(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

// promWriter writes the Prometheus text format.
type promWriter struct{ w io.Writer }

func (p *promWriter) help(name, typ, help string) {
	fmt.Fprintf(p.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p *promWriter) sample(name string, v float64, labels ...string) {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(labels[i])
			b.WriteString(`="`)
			b.WriteString(escapeLabel(labels[i+1]))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(p.w, "%s %g\n", b.String(), v)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}
