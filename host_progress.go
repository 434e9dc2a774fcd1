package mcpvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// progressBuffer is how many reports may wait for a call's callback.
const progressBuffer = 64

// progressRoutes maps the progress tokens of calls in flight to their
// callbacks.
//
// Concurrency: mu guards routes; next is atomic. Callers add and remove
// routes, sessions' readers look them up.
type progressRoutes struct {
	next   atomic.Uint64
	mu     sync.Mutex
	routes map[string]*progressSink // by the token's JSON encoding
}

// progressSink is where one call's progress notifications go.
//
// Concurrency: sessions' readers send on ch, the call's forwarding
// goroutine receives; server is read-only.
type progressSink struct {
	server string
	ch     chan protocol.ProgressParams
	clock  *progressClock // moves the call's default deadline (deadline.go)
}

// deliver hands a progress notification of server to the call that owns
// its token, without blocking (a full buffer drops it).
func (r *progressRoutes) deliver(server string, params json.RawMessage) {
	var p protocol.ProgressParams
	if json.Unmarshal(params, &p) != nil || len(p.ProgressToken) == 0 {
		return
	}
	var key bytes.Buffer
	if json.Compact(&key, p.ProgressToken) != nil {
		return
	}
	r.mu.Lock()
	sink := r.routes[key.String()]
	r.mu.Unlock()
	if sink == nil || (sink.server != "" && sink.server != server) {
		return
	}
	sink.clock.tick() // a report, even one dropped below, shows the call at work
	select {
	case sink.ch <- p:
	default:
	}
}

// CallToolWith is CallTool with options: progress reports to a callback,
// extra _meta. Cancelling ctx (or its deadline passing) abandons the call
// and sends the server notifications/cancelled. With Progress set, each
// report moves the call's default deadline (Options.CallTimeout or the
// server's timeoutMs, when ctx has no deadline of its own) to that long
// from the report.
func (s *Supervisor) callToolWith(ctx context.Context, name string, args json.RawMessage, o CallOptions) (*protocol.CallToolResult, error) {
	meta := protocol.Meta{}
	for k, v := range o.Meta {
		meta[k] = v
	}
	ro := RequestOptions{Capabilities: o.Capabilities}
	if o.Progress == nil {
		if len(meta) > 0 {
			ro.Meta = meta
		}
		return s.callTool(ctx, name, args, ro)
	}
	server := ""
	if e, ok := s.pool.Load().toolsByName.Get(name); ok {
		server = e.h.name
	}
	routes := s.opts.host.progress
	token := "mcpvisor-" + strconv.FormatUint(routes.next.Add(1), 10)
	key := strconv.Quote(token)
	meta[protocol.MetaProgressToken] = json.RawMessage(key)
	clock := &progressClock{}
	ctx = context.WithValue(ctx, progressClockKey{}, clock)
	sink := &progressSink{server: server, ch: make(chan protocol.ProgressParams, progressBuffer), clock: clock}
	routes.mu.Lock()
	routes.routes[key] = sink
	routes.mu.Unlock()

	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case p := <-sink.ch:
				o.Progress(p)
			case <-done:
				for {
					select {
					case p := <-sink.ch:
						o.Progress(p)
					default:
						return
					}
				}
			}
		}
	}()
	defer func() {
		routes.mu.Lock()
		delete(routes.routes, key)
		routes.mu.Unlock()
		close(done)
		<-finished
	}()
	ro.Meta = meta
	return s.callTool(ctx, name, args, ro)
}
