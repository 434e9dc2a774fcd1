package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Multi round-trip requests through the gateway (SEP-2322), both ways.
//
// Whatever a server behind the gateway needs from the client while it
// serves a request reaches the gateway the same way: a server of the
// stateless era answers with input_required, which the supervisor
// resolves through Options.Inputs (Forwarder.Inputs); a server of a
// handshake era sends elicitation/create, sampling/createMessage or
// roots/list, which reaches Forwarder.Handle. The gateway asks the client
// whose request it is serving, in that client's era:
//
//   - a handshake-era client gets the requests themselves, on the stream
//     of its call (ClientRequest);
//   - a stateless-era client gets input_required: its request is answered
//     with the input requests and a requestState naming the call, which
//     goes on behind the gateway, waiting; the client's retry (a new
//     request with inputResponses and that requestState) brings the
//     answers to it, and gets the next input_required or the final
//     result. A requestState is a random token, good for one retry within
//     Options.InputWait (the call is cancelled when none comes); an
//     unknown, used or expired one is -32602, as is one sent with
//     another request.
//
// A request whose first attempt already carries inputResponses (a client
// answering in advance) has them used for the first round of input; keys
// the client was not asked for are ignored, and what the servers still
// need is asked for again.

// defaultInputWait is Options.InputWait's zero value.
const defaultInputWait = 5 * time.Minute

// inputCall is a stateless-era client's request being served while it
// may need the client's input: the call behind it runs on its own
// context, and each round of input it needs is handed to whichever of the
// client's requests (the first, then each retry) is waiting.
//
// Concurrency: rounds and done are the only ways between the call's
// goroutine and the client's requests; mu guards first.
type inputCall struct {
	method, name string // the request: method and its name (tool, prompt) or URI
	caps         protocol.ClientCapabilities
	rounds       chan *inputRound // unbuffered: a round waits for a request to present it
	done         chan struct{}    // closed when the call has ended; result and err are set before
	result       any
	err          *protocol.Error
	cancel       context.CancelFunc

	mu    sync.Mutex
	first protocol.InputResponses // the first request's inputResponses, until the first round takes them
	// release gives back the bytes the call is counted in the sessions'
	// total (mcpserver.Server.Hold), once it has ended; guarded by mu,
	// as is ended.
	release func()
	ended   bool
}

// setRelease gives release to the call, to be called when it ends (at
// once when it has ended already).
func (c *inputCall) setRelease(release func()) {
	c.mu.Lock()
	ended := c.ended
	if !ended {
		c.release = release
	}
	c.mu.Unlock()
	if ended {
		release()
	}
}

// inputCallOverhead is what a call that may wait for input is counted
// besides its params: its goroutine and tables.
const inputCallOverhead = 4 << 10

// inputRound is one round of input: what the servers ask, and where the
// client's answers go.
type inputRound struct {
	reqs  protocol.InputRequests
	reply chan protocol.InputResponses // buffered 1
}

// parkedRound is a round presented to the client, waiting for its retry.
type parkedRound struct {
	call  *inputCall
	round *inputRound
	timer *time.Timer
}

// inputCallKey is the context key of the inputCall a call serves.
type inputCallKey struct{}

func inputCallOf(ctx context.Context) *inputCall {
	c, _ := ctx.Value(inputCallKey{}).(*inputCall)
	return c
}

// mrtrParams are the members of a retried request.
type mrtrParams struct {
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   *string         `json:"requestState"`
}

// inputRounds are the stateless-era clients' calls that may need input:
// the calls running on the workers, and the rounds of input parked until
// the client's retry brings the answers.
//
// Concurrency: safe for concurrent use; mu guards parked, calls is
// atomic. Each call runs on a worker goroutine (workers), its rounds
// pass to the client's requests over the call's channels.
type inputRounds struct {
	srv     *mcpserver.Server // holds each call's bytes in the sessions' bound
	log     zerolog.Logger
	wait    time.Duration // Options.InputWait
	workers *callWorkers  // where the calls run
	calls   atomic.Int64  // calls running

	mu     sync.Mutex
	parked map[string]*parkedRound // rounds waiting for a retry, by requestState; guarded by mu
}

// serve serves a stateless-era tools/call, prompts/get or
// resources/read (name: its tool, prompt or URI), started by run on the
// context it is given, through as many input rounds as it needs. A first
// attempt of a client that declared nothing it could be asked with
// (asksInput) runs on the caller's goroutine: it has no rounds.
func (in *inputRounds) serve(ctx context.Context, method, name string, params json.RawMessage, run func(context.Context) (any, *protocol.Error)) (any, *protocol.Error) {
	var p mrtrParams
	_, hasAnswers, ok1 := protocol.RawMember(params, "inputResponses")
	_, hasState, ok2 := protocol.RawMember(params, "requestState")
	if !ok1 || !ok2 || hasAnswers || hasState {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, errorf(protocol.CodeInvalidParams, "%s: %v", method, err)
		}
		if hasAnswers && p.InputResponses == nil {
			p.InputResponses = json.RawMessage(`null`)
		}
	}
	answers, perr := protocol.ParseInputResponses(p.InputResponses)
	if perr != nil {
		return nil, perr
	}
	if p.RequestState == nil && answers == nil && !asksInput(requestOf(ctx)) {
		// Nothing can be asked of this client: run the call on the
		// request's own goroutine (no hand-off to a worker and back).
		return run(ctx)
	}
	var call *inputCall
	if p.RequestState != nil {
		pk := in.takeParked(*p.RequestState, method, name)
		if pk == nil {
			return nil, errorf(protocol.CodeInvalidParams, "requestState is not one the gateway issued for this %s, or was used or has expired", method)
		}
		call = pk.call
		if answers == nil {
			answers = protocol.InputResponses{}
		}
		pk.round.reply <- answers
	} else {
		// The call and its params are kept while it waits for input
		// (up to InputWait per round): counted in the sessions' byte
		// bound until it ends.
		release, perr := in.srv.Hold(method, int64(len(params))+inputCallOverhead)
		if perr != nil {
			return nil, perr
		}
		call = in.start(ctx, method, name, answers, run)
		call.setRelease(release)
	}
	select {
	case r := <-call.rounds:
		return protocol.InputRequiredResult{ResultType: protocol.ResultInputRequired, InputRequests: r.reqs, RequestState: in.park(call, r)}, nil
	case <-call.done:
		return call.result, call.err
	case <-ctx.Done():
		// The client went away (over HTTP, closing the stream is how it
		// cancels): so does the call.
		call.cancel()
		return nil, rpcError(ctx.Err())
	}
}

// asksInput reports whether the stateless-era request whose _meta is m
// declared a capability the gateway could ask it for input with
// (sampling, elicitation or roots). A request that declared none is
// never asked: the servers' requests of its call go, as a handshake-era
// client's would, to a client that declared the capability (Forwarder.Inputs
// and ClientRequest), so its call needs no input rounds and runs inline.
func asksInput(m *mcpserver.Meta) bool {
	if m == nil {
		return false
	}
	c := &m.ClientCapabilities
	return c.Sampling != nil || c.Elicitation != nil || c.Roots != nil
}

// start starts a call that may need input, on a context of its own
// (which keeps ctx's values: what the client's _meta said).
func (in *inputRounds) start(ctx context.Context, method, name string, first protocol.InputResponses, run func(context.Context) (any, *protocol.Error)) *inputCall {
	call := &inputCall{method: method, name: name, rounds: make(chan *inputRound), done: make(chan struct{}), first: first}
	if meta := requestOf(ctx); meta != nil {
		call.caps = meta.ClientCapabilities
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	call.cancel = cancel
	cctx = context.WithValue(cctx, inputCallKey{}, call)
	in.calls.Add(1)
	in.workers.run(func() {
		defer in.calls.Add(-1)
		defer cancel()
		call.result, call.err = run(cctx)
		close(call.done)
		call.mu.Lock()
		release := call.release
		call.ended = true
		call.mu.Unlock()
		if release != nil {
			release()
		}
	})
	return call
}

// park presents round r of call to the client: it returns the
// requestState of the retry, good for Options.InputWait.
func (in *inputRounds) park(call *inputCall, r *inputRound) string {
	token := "mcpvisor-" + randomToken()
	pk := &parkedRound{call: call, round: r}
	in.mu.Lock()
	in.parked[token] = pk
	in.mu.Unlock()
	pk.timer = time.AfterFunc(in.wait, func() {
		in.mu.Lock()
		_, waiting := in.parked[token]
		delete(in.parked, token)
		in.mu.Unlock()
		if waiting {
			in.log.Debug().Str("method", call.method).Str("name", call.name).Msg("no retry brought the input asked for: the call is cancelled")
			call.cancel()
		}
	})
	return token
}

// InputsWaiting returns the number of input rounds waiting for a
// stateless-era client's retry (for status and tests).
func (g *Gateway) InputsWaiting() int {
	in := g.inputs
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.parked)
}

// InputCalls returns the number of stateless-era clients' calls running
// behind the gateway that may need input (for status and tests).
func (g *Gateway) InputCalls() int64 { return g.inputs.calls.Load() }

// takeParked returns (and forgets) the round token names, if it belongs
// to method and name.
func (in *inputRounds) takeParked(token, method, name string) *parkedRound {
	in.mu.Lock()
	defer in.mu.Unlock()
	pk := in.parked[token]
	if pk == nil || pk.call.method != method || pk.call.name != name {
		return nil
	}
	delete(in.parked, token)
	pk.timer.Stop()
	return pk
}

// cancelAll cancels every call waiting for a retry (Close).
func (in *inputRounds) cancelAll() {
	in.mu.Lock()
	parked := make([]*parkedRound, 0, len(in.parked))
	for token, pk := range in.parked {
		parked = append(parked, pk)
		delete(in.parked, token)
	}
	in.mu.Unlock()
	for _, pk := range parked {
		pk.timer.Stop()
		pk.call.cancel()
	}
}

// resolve answers one round of input for call: from the first request's
// inputResponses when they have the keys, else from the client, through
// its next request. Keys the client does not answer are left out (the
// server then asks again).
func (call *inputCall) resolve(ctx context.Context, reqs protocol.InputRequests) (protocol.InputResponses, error) {
	call.mu.Lock()
	first := call.first
	call.first = nil
	call.mu.Unlock()
	out := protocol.InputResponses{}
	ask := protocol.InputRequests{}
	for k, r := range reqs {
		if a, ok := first[k]; ok {
			out[k] = a
		} else {
			ask[k] = r
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	r := &inputRound{reqs: ask, reply: make(chan protocol.InputResponses, 1)}
	select {
	case call.rounds <- r:
	case <-ctx.Done():
		return nil, fmt.Errorf("no request of the client to ask it for input: %w", context.Cause(ctx))
	}
	select {
	case answers := <-r.reply:
		for k := range ask {
			if a, ok := answers[k]; ok {
				out[k] = a
			}
		}
		return out, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("the client did not retry with the input asked for: %w", context.Cause(ctx))
	}
}

// ask is a handshake-era server's request (method, params) asked of a
// stateless-era client as one round of input.
func (call *inputCall) ask(ctx context.Context, key, method string, params json.RawMessage) (any, error) {
	answers, err := call.resolve(ctx, protocol.InputRequests{key: {Method: method, Params: params}})
	if err != nil {
		return nil, protocol.NewError(protocol.CodeInternalError, "mcpvisor gateway: %v", err)
	}
	a, ok := answers[key]
	if !ok {
		return nil, protocol.NewError(protocol.CodeInternalError, "mcpvisor gateway: the client did not answer %s", method)
	}
	return a, nil
}

// declares reports whether caps declare what an input request of method
// needs.
func declares(caps protocol.ClientCapabilities, method string, wantURL bool) bool {
	switch method {
	case protocol.MethodSamplingCreateMessage:
		return caps.Sampling != nil
	case protocol.MethodRootsList:
		return caps.Roots != nil
	case protocol.MethodElicitationCreate:
		if caps.Elicitation == nil {
			return false
		}
		if !wantURL {
			return true
		}
		var e map[string]json.RawMessage
		_ = json.Unmarshal(*caps.Elicitation, &e)
		_, ok := e["url"]
		return ok
	}
	return false
}

// Inputs resolves a round of input a server of the stateless era asks
// for (the supervisor's Options.Inputs): from the stateless-era client
// whose request the call serves, or, for a handshake-era client's call,
// by sending it each request (ClientRequest). With no gateway attached,
// or no client to ask, the call fails.
func (f *Forwarder) Inputs(ctx context.Context, server, method string, reqs protocol.InputRequests) (protocol.InputResponses, error) {
	g := f.g.Load()
	if g == nil {
		return nil, protocol.NewError(protocol.CodeMethodNotFound, "mcpvisor gateway: no downstream client is connected to answer %s", method)
	}
	if call := inputCallOf(ctx); call != nil {
		return call.resolve(ctx, reqs)
	}
	var (
		mu     sync.Mutex
		out    = protocol.InputResponses{}
		failed error
		wg     sync.WaitGroup
	)
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range reqs {
			if !yield(k) {
				return
			}
		}
	}) {
		r := reqs[key]
		wg.Go(func() {
			res, err := g.ClientRequest(ctx, server, r.Method, r.Params)
			var raw json.RawMessage
			if err == nil {
				raw, err = json.Marshal(res)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if failed == nil {
					failed = err
				}
				return
			}
			out[key] = raw
		})
	}
	wg.Wait()
	if failed != nil {
		return nil, failed
	}
	return out, nil
}

// randomToken returns 128 random bits, hex.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
