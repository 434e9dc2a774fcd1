package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// fanOutWait bounds each wait of the fan-out.
const fanOutWait = 30 * time.Second

func (r *runner) fanOutScenario(ctx context.Context) {
	r.prog.Begin(ScenarioFanOut, len(r.cfg.FanOut))
	for _, n := range r.cfg.FanOut {
		if ctx.Err() != nil {
			break
		}
		r.prog.Step("mcpvisor %d subscribers × %d list_changed", n, r.cfg.FanOutOps)
		res := r.fanOut(ctx, n)
		if res.Error != "" {
			r.fail("%d subscribers: %s", n, res.Error)
		}
		r.res.FanOut = append(r.res.FanOut, res)
	}
	r.prog.End("%d sizes", len(r.cfg.FanOut))
}

// receipt is one subscriber's receipt of a tools_changed event.
type receipt struct {
	seq     uint64
	at      time.Time
	latency time.Duration // from the event's Time to its receipt
}

// fanOut subscribes n subscribers (the public Subscribe, default buffer),
// each draining its channel in a goroutine of its own, to a Supervisor
// with one stdio mock server, and then, FanOutOps times, calls the
// server's announce tool (which adds a tool and sends
// notifications/tools/list_changed) and waits until every subscriber has
// the resulting tools_changed event. One more subscription, read here,
// says which event each op produced.
func (r *runner) fanOut(ctx context.Context, n int) (res FanOutResult) {
	res = FanOutResult{Subscribers: n}
	fail := func(format string, args ...any) FanOutResult {
		res.Error = fmt.Sprintf(format, args...)
		return res
	}
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	if err != nil {
		return fail("start: %v", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := sup.Close(cctx); err != nil && res.Error == "" {
			res.Error = fmt.Sprintf("close: %v", err)
		}
	}()
	const server = "fan"
	sctx, cancel := context.WithTimeout(ctx, connectTimeout)
	err = setAndSettle(sctx, sup, map[string]mcpvisor.ServerConfig{server: {Config: transports.Config{Command: r.bins.Mock}}})
	cancel()
	if err != nil {
		return fail("connect: %v", err)
	}

	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	probe := sup.Subscribe(subCtx)
	receipts := make(chan receipt, 4*n)
	drops := make([]uint64, n) // drops[i] is written by subscriber i until it ends
	var subscribers sync.WaitGroup
	for i := range n {
		events := sup.Subscribe(subCtx)
		subscribers.Go(func() {
			for ev := range events {
				now := time.Now()
				switch ev := ev.(type) {
				case *mcpvisor.GapEvent:
					drops[i] += ev.Dropped
				case *mcpvisor.ToolsChangedEvent:
					select {
					case receipts <- receipt{seq: ev.Seq, at: now, latency: now.Sub(ev.Time)}:
					case <-subCtx.Done():
						return
					}
				}
			}
		})
	}
	lastSeq, err := sup.LastSeq(ctx)
	if err != nil {
		return fail("LastSeq: %v", err)
	}

	var delivery, ops []time.Duration
	for op := range r.cfg.FanOutOps {
		if ctx.Err() != nil {
			break
		}
		args, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("tool_%d", op)})
		t0 := time.Now()
		if _, err := sup.CallTool(ctx, mcpvisor.QualifiedName(server, "announce"), json.RawMessage(args)); err != nil {
			return fail("op %d: announce: %v", op, err)
		}
		seq, err := awaitToolsChanged(probe, server, lastSeq)
		if err != nil {
			return fail("op %d: %v", op, err)
		}
		lastSeq = seq
		timeout := time.After(fanOutWait)
		var lastAt time.Time
		for got := 0; got < n; {
			select {
			case rc := <-receipts:
				if rc.seq != seq {
					continue // an earlier event's, late
				}
				got++
				delivery = append(delivery, rc.latency)
				if rc.at.After(lastAt) {
					lastAt = rc.at
				}
			case <-timeout:
				return fail("op %d: only %d of %d subscribers got event %d within %v (one that lost it never will)", op, got, n, seq, fanOutWait)
			}
		}
		ops = append(ops, lastAt.Sub(t0))
		res.Ops++
	}
	stop()
	subscribers.Wait()
	for _, d := range drops {
		res.Drops += d
	}
	slices.Sort(delivery)
	slices.Sort(ops)
	if len(delivery) > 0 {
		res.DeliveryP50Us = us(Percentile(delivery, 50))
		res.DeliveryP99Us = us(Percentile(delivery, 99))
		res.DeliveryMaxUs = us(delivery[len(delivery)-1])
		res.OpP50Ms = ms(Percentile(ops, 50))
		res.OpP99Ms = ms(Percentile(ops, 99))
	}
	return res
}

// awaitToolsChanged reads probe until the tools_changed event of server
// after sequence number after, and returns its Seq.
func awaitToolsChanged(probe <-chan mcpvisor.Event, server string, after uint64) (uint64, error) {
	timeout := time.After(fanOutWait)
	for {
		select {
		case ev, ok := <-probe:
			if !ok {
				return 0, fmt.Errorf("the probe subscription ended")
			}
			if ev, ok := ev.(*mcpvisor.GapEvent); ok {
				return 0, fmt.Errorf("the probe lost %d events", ev.Dropped)
			}
			if h := ev.Header(); h.Type == mcpvisor.EventToolsChanged && h.Server == server && h.Seq > after {
				return h.Seq, nil
			}
		case <-timeout:
			return 0, fmt.Errorf("no tools_changed from %s within %v", server, fanOutWait)
		}
	}
}
