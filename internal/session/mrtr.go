package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Multi round-trip requests (SEP-2322): a 2026-07-28 server answers
// tools/call, prompts/get or resources/read with an InputRequiredResult
// when it needs the client's input. The session resolves each round (see
// Options.Input and Options.Requests) and sends the request again under a
// new id with the answers and the unchanged requestState, until the
// server completes it or MaxInputRounds rounds have passed. The caller
// only ever sees the final answer or an error.

// MaxInputRounds bounds the rounds of one multi round-trip request, so
// that a server that asks forever cannot keep a call alive.
const MaxInputRounds = 16

// InputHandler resolves one round of a multi round-trip request: method
// is the request the server answered (tools/call, prompts/get,
// resources/read) and reqs what it asks. It returns an answer for every
// key it can; a key left out is retried without an answer (the server
// then usually asks again). ctx derives from the request's own context
// (its values included) and ends after Options.RequestTimeout.
type InputHandler func(ctx context.Context, method string, reqs protocol.InputRequests) (protocol.InputResponses, error)

// Errors of multi round-trip requests, matched with errors.Is (an
// *InputError matches ErrInputRequired and its cause).
var (
	// ErrInputRequired: the server needed input for the request and did
	// not get it (no handler, a handler failed, or too many rounds).
	ErrInputRequired = errors.New("mcp: the server needs input the client could not give")
	// ErrTooManyInputRounds: the server still asked for input after
	// MaxInputRounds rounds.
	ErrTooManyInputRounds = errors.New("mcp: too many input rounds")
	// ErrNoInputHandler: nothing answers the kind of input the server
	// asked for.
	ErrNoInputHandler = errors.New("mcp: no handler for the input requested")
)

// InputError reports a multi round-trip request that could not be
// completed: Key and InputMethod name the input request that failed, if
// one did.
type InputError struct {
	Method      string // the request: tools/call, prompts/get or resources/read
	Round       int    // 1 for the server's first InputRequiredResult
	Key         string
	InputMethod string
	Err         error
}

func (e *InputError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("mcp: %s, input round %d: %s (%s): %v", e.Method, e.Round, e.Key, e.InputMethod, e.Err)
	}
	return fmt.Sprintf("mcp: %s, input round %d: %v", e.Method, e.Round, e.Err)
}

// Is makes an InputError match ErrInputRequired.
func (e *InputError) Is(target error) bool { return target == ErrInputRequired }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

// RequestOptions are the per-request extras of CallToolWith,
// GetPromptWith and ReadResourceWith. The zero value adds nothing.
type RequestOptions struct {
	// Meta is added to the request's _meta.
	Meta protocol.Meta
	// Capabilities, when set, are the client capabilities declared in
	// this request's _meta instead of Options.Capabilities (stateless era
	// only: a handshake-era session declared its capabilities once). A
	// gateway declares the capabilities of the client it serves, so that
	// the server asks for no input that client cannot give.
	Capabilities *protocol.ClientCapabilities
}

// mrtr runs the request method, whose first params are first, through as
// many input rounds as the server asks for (retry builds the params of a
// retry), and returns the final result, raw. isInput reports whether a
// raw result is an InputRequiredResult (the caller may know it from a
// decode it needs anyway).
func (s *Session) mrtr(ctx context.Context, method string, first any, retry func(protocol.MRTRParams) any, isInput func(json.RawMessage) bool) (json.RawMessage, error) {
	raw, err := s.exchange(ctx, method, first, 0)
	for round := 1; ; round++ {
		if err != nil || !isInput(raw) {
			return raw, err
		}
		var ir protocol.InputRequiredResult
		if err := json.Unmarshal(raw, &ir); err != nil {
			return nil, fmt.Errorf("%w: %s: input_required result: %v", ErrMalformedResponse, method, err)
		}
		if len(ir.InputRequests) == 0 && ir.RequestState == "" {
			return nil, fmt.Errorf("%w: %s: input_required result with neither inputRequests nor requestState", ErrMalformedResponse, method)
		}
		if round > MaxInputRounds {
			return nil, &InputError{Method: method, Round: round, Err: ErrTooManyInputRounds}
		}
		var answers protocol.InputResponses
		if len(ir.InputRequests) > 0 {
			if answers, err = s.inbound.resolveInputs(ctx, method, round, ir.InputRequests); err != nil {
				return nil, err
			}
		}
		raw, err = s.exchange(ctx, method, retry(protocol.MRTRParams{InputResponses: answers, RequestState: ir.RequestState}), 0)
	}
}

// resolveInputs answers one round: Options.Input when set, else each
// request on its own (concurrently) through Options.Requests.
func (sr *serverRequests) resolveInputs(ctx context.Context, method string, round int, reqs protocol.InputRequests) (protocol.InputResponses, error) {
	for key, r := range reqs {
		if !slices.Contains(protocol.InputMethods, r.Method) {
			return nil, &InputError{Method: method, Round: round, Key: key, InputMethod: r.Method,
				Err: fmt.Errorf("%w: %q is not a request a server may ask for input with", ErrMalformedResponse, r.Method)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, sr.timeout)
	defer cancel()
	if sr.input != nil {
		answers, err := sr.input(ctx, method, reqs)
		if err != nil {
			return nil, &InputError{Method: method, Round: round, Err: err}
		}
		return answers, nil
	}
	if sr.requests == nil {
		key := slices.Sorted(maps.Keys(reqs))[0]
		return nil, &InputError{Method: method, Round: round, Key: key, InputMethod: reqs[key].Method, Err: ErrNoInputHandler}
	}
	var (
		mu      sync.Mutex
		answers = make(protocol.InputResponses, len(reqs))
		failed  *InputError
		wg      sync.WaitGroup
	)
	for key, r := range reqs {
		wg.Go(func() {
			res, err := sr.requests(ctx, r.Method, r.Params)
			var enc json.RawMessage
			if err == nil {
				enc, err = json.Marshal(res)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if failed == nil || key < failed.Key {
					failed = &InputError{Method: method, Round: round, Key: key, InputMethod: r.Method, Err: err}
				}
				return
			}
			answers[key] = enc
		})
	}
	wg.Wait()
	if failed != nil {
		return nil, failed
	}
	return answers, nil
}

// Request sends a request the session has no typed method for (the
// methods of an extension, say) and returns its result raw. params, a
// JSON object or nil, gets the request's _meta: in the stateless era the
// session's members (with o.Capabilities and o.Meta applied) merged over
// the _meta params carries; in the handshake eras o.Meta merged over it.
func (s *Session) Request(ctx context.Context, method string, params json.RawMessage, o RequestOptions) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, fmt.Errorf("%s: params are not a JSON object: %w", method, err)
		}
	}
	meta := protocol.Meta{}
	if raw, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	for k, v := range s.meta.options(o) {
		meta[k] = v
	}
	if len(meta) > 0 {
		raw, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		obj["_meta"] = raw
	}
	var out json.RawMessage
	if err := s.Call(ctx, method, obj, &out); err != nil {
		return nil, err
	}
	return out, nil
}
