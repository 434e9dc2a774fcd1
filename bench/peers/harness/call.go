package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

// connectTimeout bounds every connect of a client (and the start of a
// server process).
const connectTimeout = 2 * time.Minute

// callGrace is how long a batch's calls may take beyond the batch's
// duration before the batch is abandoned.
const callGrace = time.Minute

// callScenario runs the call and limit scenarios: for every transport and
// payload, the floor (limit) and every client in every era (call), at
// every level of calls in flight. A client keeps one session per
// transport, payload and era, across the levels.
func (r *runner) callScenario(ctx context.Context) {
	withCalls, withFloor := r.cfg.Has(ScenarioCall), r.cfg.Has(ScenarioLimit)
	total := 0
	for _, tr := range r.cfg.Transports {
		for _, set := range r.cfg.CallSets {
			if withFloor && tr != TransportWS {
				total += len(set.InFlight)
			}
			if withCalls {
				for _, name := range r.cfg.Clients {
					if tr != TransportWS || name == Mcpvisor {
						total += len(set.InFlight) * len(set.Eras)
					}
				}
			}
		}
	}
	name := ScenarioCall
	switch {
	case !withCalls:
		name = ScenarioLimit
	case withFloor:
		name = ScenarioCall + "+" + ScenarioLimit
	}
	r.prog.Begin(name, total)
	batches := len(r.res.Call)
	for _, tr := range r.cfg.Transports {
		if tr == TransportWS && withCalls {
			r.note("WebSocket (ws) is measured for mcpvisor only: go-sdk and mcp-go have no WebSocket client transport; nor is there a WebSocket floor.")
		}
		for _, set := range r.cfg.CallSets {
			if ctx.Err() != nil {
				break
			}
			r.callSet(ctx, tr, set, withCalls, withFloor)
		}
	}
	r.prog.End("%d batches", len(r.res.Call)-batches)
}

// mockPayloadArgs are the mock server's flags for an answer of payload
// bytes: none for 16 (the echo of EchoText).
func mockPayloadArgs(payload int) []string {
	if payload == len(EchoText) {
		return nil
	}
	return []string{"-payload", strconv.Itoa(payload)}
}

// wantText is what the echo returns with payload bytes.
func wantText(payload int) string {
	if payload == len(EchoText) {
		return EchoText
	}
	return strings.Repeat("x", payload)
}

// contender is one client (or the floor) of a call group, connected.
type contender struct {
	base  CallResult
	call  func(context.Context) error
	pid   int    // the server process, for its CPU; 0 when unknown
	err   string // why it could not connect
	close func() error
}

// callSet runs one transport and payload: for each era, the clients (and,
// with the first era, the floor) are connected at once and measured in
// interleaved rounds, so that a change of the machine's load over time
// affects them alike.
func (r *runner) callSet(ctx context.Context, tr string, set CallSet, withCalls, withFloor bool) {
	var floor *contender
	if withFloor && tr != TransportWS {
		floor = r.startFloor(tr, set.Payload)
		if floor != nil && floor.close != nil {
			defer func() {
				if err := floor.close(); err != nil {
					r.fail("floor %s: close: %v", tr, err)
				}
			}()
		}
	}
	eras := set.Eras
	if !withCalls {
		eras = []string{""}
	}
	var url string
	serverPid := 0
	if withCalls && tr != TransportStdio {
		mt := mockserver.TransportHTTP
		if tr == TransportWS {
			mt = mockserver.TransportWS
		}
		srv, err := StartNetServer(r.bins.Mock, mockserver.URLLinePrefix, append([]string{"-transport", mt, "-listen", mockserver.DefaultListen}, mockPayloadArgs(set.Payload)...)...)
		if err != nil {
			r.fail("%s mock server: %v", tr, err)
			withCalls = false
		} else {
			defer func() {
				if err := srv.Stop(); err != nil {
					r.fail("%s mock server: %v", tr, err)
				}
			}()
			url, serverPid = srv.URL, srv.Pid()
		}
	}
	for i, era := range eras {
		if ctx.Err() != nil {
			return
		}
		var cs []*contender
		if i == 0 && floor != nil {
			cs = append(cs, floor)
		}
		if withCalls {
			for _, name := range r.cfg.Clients {
				p, _ := PeerByName(name)
				if tr == TransportWS && p.ConnectWS == nil {
					continue
				}
				cs = append(cs, r.connectContender(ctx, p, tr, era, set.Payload, url, serverPid))
			}
		}
		r.res.Call = append(r.res.Call, r.interleaved(ctx, set, cs)...)
		for _, c := range cs {
			if c != floor && c.close != nil {
				if err := c.close(); err != nil {
					r.fail("%s %s %s: close: %v", c.base.Client, tr, era, err)
				}
			}
		}
	}
}

// connectContender connects client p over tr in era to a mock server
// answering with payload bytes: over stdio a process of its own, else the
// server at url (process serverPid).
func (r *runner) connectContender(ctx context.Context, p Peer, tr, era string, payload int, url string, serverPid int) *contender {
	c := &contender{base: CallResult{Client: p.Name, Transport: tr, Era: era, PayloadBytes: payload}, pid: serverPid}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var s Session
	var err error
	switch tr {
	case TransportStdio:
		before := Children(r.bins.Mock)
		s, err = p.Connect(cctx, Command{Path: r.bins.Mock, Args: mockPayloadArgs(payload)}, era)
		if err == nil {
			for _, pid := range Children(r.bins.Mock) {
				if !slices.Contains(before, pid) {
					c.pid = pid
				}
			}
		}
	case TransportHTTP:
		s, err = p.ConnectHTTP(cctx, url, era)
	case TransportWS:
		s, err = p.ConnectWS(cctx, url, era)
	}
	if err == nil && s.Version() != WantVersion[era] {
		err = fmt.Errorf("negotiated %q, want %q", s.Version(), WantVersion[era])
		s.Close()
	}
	if err != nil {
		c.err = r.fail("%s %s %s %s: connect: %v", p.Name, tr, era, SizeName(payload), err)
		return c
	}
	c.base.Version = s.Version()
	c.call = EchoCall(s, wantText(payload))
	c.close = s.Close
	return c
}

// startFloor starts the limit scenario's bare echo child for tr and
// payload.
func (r *runner) startFloor(tr string, payload int) *contender {
	c := &contender{base: CallResult{Client: Floor, Transport: tr, PayloadBytes: payload}}
	echoPayload := payload
	if payload == len(EchoText) {
		echoPayload = 0 // the request itself comes back
	}
	switch tr {
	case TransportStdio:
		p, err := StartPipeEcho(r.bins.Echo, echoPayload)
		if err != nil {
			c.err = r.fail("floor %s: %v", tr, err)
			return c
		}
		c.pid, c.close = p.cmd.Process.Pid, p.Close
		c.call = EchoCall(p, EchoText)
	case TransportHTTP:
		srv, err := StartNetServer(r.bins.Echo, EchoURLPrefix, "-mode", "http", "-payload", strconv.Itoa(echoPayload))
		if err != nil {
			c.err = r.fail("floor %s: %v", tr, err)
			return c
		}
		h := NewHTTPEcho(srv.URL, echoPayload)
		c.pid = srv.Pid()
		c.close = func() error { return errors.Join(h.Close(), srv.Stop()) }
		c.call = EchoCall(h, EchoText)
	}
	return c
}

// interleaved measures the contenders at every level of set: each is
// warmed up, then they take turns, set.Rounds times (in a rotating
// order), each turn a batch of 1/Rounds of set's calls and duration; a
// contender's figures combine its turns, one result per contender and
// level.
func (r *runner) interleaved(ctx context.Context, set CallSet, cs []*contender) (out []CallResult) {
	rounds := max(set.Rounds, 1)
	for _, n := range set.InFlight {
		if ctx.Err() != nil {
			return out
		}
		samples := make([][]Sample, len(cs))
		errs := make([]string, len(cs))
		name := func(c *contender) string {
			return fmt.Sprintf("%s %s %s %s ×%d", c.base.Client, c.base.Transport, c.base.Era, SizeName(c.base.PayloadBytes), n)
		}
		for i, c := range cs {
			r.prog.Step("%s: warm-up", name(c))
			if c.err != "" {
				errs[i] = c.err
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, callGrace)
			err := Warm(wctx, set.Warmup, n, c.call)
			cancel()
			if err != nil {
				errs[i] = r.fail("%s: warm-up: %v", name(c), err)
			}
		}
		batch := Batch{InFlight: n, Calls: max(set.Calls/rounds, 1), Duration: time.Duration(set.Duration) / time.Duration(rounds)}
		for round := range rounds {
			for k := range cs {
				i := (k + round) % len(cs)
				c := cs[i]
				if errs[i] != "" || ctx.Err() != nil {
					continue
				}
				r.prog.Status("%s, round %d/%d", name(c), round+1, rounds)
				b := batch
				b.ServerPid = c.pid
				bctx, cancel := context.WithTimeout(ctx, b.Duration+callGrace)
				smp, err := MeasureSample(bctx, b, c.call)
				cancel()
				samples[i] = append(samples[i], smp)
				if err != nil {
					errs[i] = r.fail("%s: %v", name(c), err)
				}
			}
		}
		for i, c := range cs {
			res := c.base
			res.InFlight = n
			res.CallStats = Combine(samples[i]...)
			res.Error = errs[i]
			if res.Error == "" && res.Calls == 0 {
				res.Error = "no call completed"
			}
			out = append(out, res)
		}
	}
	return out
}
