package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// feedPokeGap is the least time between two samples that events asked
// for: a reconnect storm of a thousand servers costs at most ten samples
// a second, each one Status() call.
const feedPokeGap = 100 * time.Millisecond

// maxChannelLog bounds the channel messages the feed remembers for the
// dashboard's channel view.
const maxChannelLog = 200

// dashFeed samples the servers' status for the dashboard streams: every
// SampleInterval (which also adds a point to each server's calls/s and
// errors/s history), and soon after an event that changes a server's row
// (state, toggle, tool list), at most every feedPokeGap. Each stream sends
// its browser only the rows that changed since it last sent them. The
// feed starts with the first stream and runs until the gateway closes.
//
// Concurrency: safe for concurrent use. One goroutine (run) samples; mu
// guards the latest snapshot, the changed channel and the channel log.
type dashFeed struct {
	site *gateway.Site
	opts Options
	once sync.Once

	mu       sync.Mutex
	snap     *feedSnapshot   // latest sample; guarded by mu
	changed  chan struct{}   // closed when snap is replaced; guarded by mu
	channels []channelRecord // the last channel messages, oldest first; guarded by mu
	poke     chan struct{}   // capacity 1: an event asks for a sample
}

// feedSnapshot is one sample. It is never modified once published.
type feedSnapshot struct {
	at      time.Time
	number  uint64                          // samples taken so far
	names   []string                        // sorted
	reports map[string]gateway.ServerReport // by server
	encoded map[string][]byte               // each report as JSON, by server
	version map[string]uint64               // sample number at which encoded last changed, by server
	// history holds each server's [calls, errors] per SampleInterval,
	// oldest first, at most History points.
	history map[string][][2]uint64
	// point is the last history point of each server that had calls or
	// errors in it (a tick's sample), nil for a sample events asked for.
	point map[string][2]uint64
	tick  bool
	// totals are the counters the next tick's point is computed from.
	totals map[string][2]uint64
}

// channelRecord is one channel message as the channel view shows it.
type channelRecord struct {
	Seq     uint64          `json:"seq"`
	Time    time.Time       `json:"time"`
	Server  string          `json:"server"`
	Content string          `json:"content"`
	Meta    json.RawMessage `json:"meta,omitempty"`
}

func newDashFeed(site *gateway.Site, o Options) *dashFeed {
	return &dashFeed{site: site, opts: o, changed: make(chan struct{}), poke: make(chan struct{}, 1)}
}

// start takes the first sample (so that a stream has a snapshot at once)
// and starts the sampling goroutine; only the first call does anything.
func (f *dashFeed) start() {
	f.once.Do(func() {
		f.sample(true)
		ctx, cancel := context.WithCancel(context.Background())
		events := f.site.Backend().Subscribe(ctx, mcpvisor.BufferSize(4096))
		go func() {
			<-f.site.Done()
			cancel()
		}()
		go f.run(ctx, events)
	})
}

// latest returns the latest snapshot and a channel closed when a newer
// one is published.
func (f *dashFeed) latest() (*feedSnapshot, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.changed
}

func (f *dashFeed) run(ctx context.Context, events <-chan mcpvisor.Event) {
	ticker := time.NewTicker(f.opts.SampleInterval)
	defer ticker.Stop()
	var gap <-chan time.Time // set while pokes wait for feedPokeGap
	poked := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev, ok := ev.(*mcpvisor.ChannelMessageEvent); ok {
				f.recordChannel(ev)
			}
			switch ev.Header().Type {
			case mcpvisor.EventServerState, mcpvisor.EventServerToggled, mcpvisor.EventToolsChanged,
				mcpvisor.EventPromptsChanged, mcpvisor.EventResourcesChanged, mcpvisor.EventToolDefinitionChanged,
				mcpvisor.EventAuthRequired, mcpvisor.EventListFailed, mcpvisor.EventGap:
				poked = true
			}
			if poked && gap == nil {
				f.sample(false)
				poked = false
				gap = time.After(feedPokeGap)
			}
		case <-gap:
			gap = nil
			if poked {
				f.sample(false)
				poked = false
				gap = time.After(feedPokeGap)
			}
		case <-ticker.C:
			f.sample(true)
			poked = false
		}
	}
}

// sample takes the servers' status and publishes it; tick adds a point
// to each server's history.
func (f *dashFeed) sample(tick bool) {
	rep := f.site.Status()
	f.mu.Lock()
	prev := f.snap
	f.mu.Unlock()
	s := &feedSnapshot{
		at: f.opts.Now(), tick: tick,
		reports: make(map[string]gateway.ServerReport, len(rep.Servers)),
		encoded: make(map[string][]byte, len(rep.Servers)),
		version: make(map[string]uint64, len(rep.Servers)),
		history: make(map[string][][2]uint64, len(rep.Servers)),
		totals:  make(map[string][2]uint64, len(rep.Servers)),
	}
	if prev != nil {
		s.number = prev.number + 1
	}
	if tick {
		s.point = map[string][2]uint64{}
	}
	for _, r := range rep.Servers {
		name := r.Name
		s.names = append(s.names, name)
		s.reports[name] = r
		enc, _ := json.Marshal(dashRow(r))
		s.encoded[name] = enc
		s.version[name] = s.number
		total := [2]uint64{r.Latency.Calls, r.Latency.Errors}
		s.totals[name] = total
		var hist [][2]uint64
		if prev != nil {
			if bytes.Equal(prev.encoded[name], enc) {
				s.version[name] = prev.version[name]
			}
			hist = prev.history[name]
			if t, ok := prev.totals[name]; ok && !tick {
				s.totals[name] = t
			}
		}
		if tick {
			var pt [2]uint64
			if prev != nil {
				if last, ok := prev.totals[name]; ok && total[0] >= last[0] && total[1] >= last[1] {
					pt = [2]uint64{total[0] - last[0], total[1] - last[1]}
				}
			}
			if len(hist) >= f.opts.History {
				hist = hist[len(hist)-f.opts.History+1:]
			}
			hist = append(slices.Clip(hist), pt)
			if pt != ([2]uint64{}) {
				s.point[name] = pt
			}
		}
		s.history[name] = hist
	}
	slices.Sort(s.names)
	f.mu.Lock()
	f.snap = s
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *dashFeed) recordChannel(ev *mcpvisor.ChannelMessageEvent) {
	var p struct {
		Content string          `json:"content"`
		Meta    json.RawMessage `json:"meta,omitempty"`
	}
	_ = json.Unmarshal(ev.Data, &p)
	rec := channelRecord{Seq: ev.Seq, Time: ev.Time, Server: ev.Server, Content: p.Content, Meta: p.Meta}
	f.mu.Lock()
	if len(f.channels) >= maxChannelLog {
		f.channels = slices.Delete(f.channels, 0, len(f.channels)-maxChannelLog+1)
	}
	f.channels = append(f.channels, rec)
	f.mu.Unlock()
}

func (f *dashFeed) channelLog() []channelRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.channels)
}

// dashServer is one server's row as the dashboard gets it: the status
// report less the latency histogram (the percentiles and counters stay).
type dashServer struct {
	gateway.ServerReport
	Latency struct {
		Calls  uint64 `json:"calls"`
		Errors uint64 `json:"errors"`
	} `json:"latency"`
}

func dashRow(r gateway.ServerReport) dashServer {
	d := dashServer{ServerReport: r}
	d.Latency.Calls, d.Latency.Errors = r.Latency.Calls, r.Latency.Errors
	return d
}
