package harness

import (
	"context"
	"fmt"
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

// callSet runs one transport and payload.
func (r *runner) callSet(ctx context.Context, tr string, set CallSet, withCalls, withFloor bool) {
	if withFloor && tr != TransportWS {
		r.floorSet(ctx, tr, set)
	}
	if !withCalls {
		return
	}
	args := mockPayloadArgs(set.Payload)
	var connect func(p Peer, era string) (Session, error)
	serverPid := 0
	switch tr {
	case TransportStdio:
		cmd := Command{Path: r.bins.Mock, Args: args}
		connect = func(p Peer, era string) (Session, error) {
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			return p.Connect(cctx, cmd, era)
		}
	case TransportHTTP, TransportWS:
		mt := mockserver.TransportHTTP
		if tr == TransportWS {
			mt = mockserver.TransportWS
		}
		srv, err := StartNetServer(r.bins.Mock, mockserver.URLLinePrefix, append([]string{"-transport", mt, "-listen", mockserver.DefaultListen}, args...)...)
		if err != nil {
			r.fail("%s mock server: %v", tr, err)
			return
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				r.fail("%s mock server: %v", tr, err)
			}
		}()
		serverPid = srv.Pid()
		connect = func(p Peer, era string) (Session, error) {
			cctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			if tr == TransportWS {
				return p.ConnectWS(cctx, srv.URL, era)
			}
			return p.ConnectHTTP(cctx, srv.URL, era)
		}
	}
	for _, era := range set.Eras {
		for _, name := range r.cfg.Clients {
			p, _ := PeerByName(name)
			if tr == TransportWS && p.ConnectWS == nil {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			base := CallResult{Client: name, Transport: tr, Era: era, PayloadBytes: set.Payload}
			s, err := connect(p, era)
			if err == nil && s.Version() != WantVersion[era] {
				err = fmt.Errorf("negotiated %q, want %q", s.Version(), WantVersion[era])
				s.Close()
			}
			if err != nil {
				msg := r.fail("%s %s %s %s: connect: %v", name, tr, era, SizeName(set.Payload), err)
				for _, n := range set.InFlight {
					res := base
					res.InFlight, res.Error = n, msg
					r.res.Call = append(r.res.Call, res)
					r.prog.Step("%s %s %s: connect failed", name, tr, era)
				}
				continue
			}
			base.Version = s.Version()
			pid := serverPid
			if tr == TransportStdio {
				pid = 0
				if pids := Children(r.bins.Mock); len(pids) == 1 {
					pid = pids[0]
				}
			}
			r.batches(ctx, base, set, pid, EchoCall(s, wantText(set.Payload)))
			if err := s.Close(); err != nil {
				r.fail("%s %s %s: close: %v", name, tr, era, err)
			}
		}
	}
}

// floorSet runs the limit scenario's batches of one transport and
// payload: a bare echo child process.
func (r *runner) floorSet(ctx context.Context, tr string, set CallSet) {
	payload := set.Payload
	if payload == len(EchoText) {
		payload = 0 // the request itself comes back
	}
	base := CallResult{Client: Floor, Transport: tr, PayloadBytes: set.Payload}
	var s Session
	pid := 0
	switch tr {
	case TransportStdio:
		p, err := StartPipeEcho(r.bins.Echo, payload)
		if err != nil {
			r.fail("floor %s: %v", tr, err)
			return
		}
		s, pid = p, p.cmd.Process.Pid
	case TransportHTTP:
		srv, err := StartNetServer(r.bins.Echo, EchoURLPrefix, "-mode", "http", "-payload", strconv.Itoa(payload))
		if err != nil {
			r.fail("floor %s: %v", tr, err)
			return
		}
		defer srv.Stop()
		s, pid = NewHTTPEcho(srv.URL, payload), srv.Pid()
	}
	r.batches(ctx, base, set, pid, EchoCall(s, EchoText))
	if err := s.Close(); err != nil {
		r.fail("floor %s: close: %v", tr, err)
	}
}

// batches measures call at every level of set, each after a warm-up.
func (r *runner) batches(ctx context.Context, base CallResult, set CallSet, serverPid int, call func(context.Context) error) {
	for _, n := range set.InFlight {
		if ctx.Err() != nil {
			return
		}
		res := base
		res.InFlight = n
		r.prog.Step("%s %s %s %s ×%d", base.Client, base.Transport, base.Era, SizeName(base.PayloadBytes), n)
		bctx, cancel := context.WithTimeout(ctx, time.Duration(set.Duration)+callGrace)
		err := Warm(bctx, set.Warmup, n, call)
		if err == nil {
			res.CallStats, err = Measure(bctx, Batch{InFlight: n, Calls: set.Calls, Duration: time.Duration(set.Duration), ServerPid: serverPid}, call)
		}
		cancel()
		if err != nil {
			res.Error = r.fail("%s %s %s %s ×%d: %v", base.Client, base.Transport, base.Era, SizeName(base.PayloadBytes), n, err)
		}
		r.res.Call = append(r.res.Call, res)
	}
}
