package mcpvisor

import (
	"context"
	"encoding/json"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// Multi round-trip requests (2026-07-28, SEP-2322): a server may answer
// tools/call, prompts/get or resources/read with an InputRequiredResult
// asking for elicitation, sampling or roots. The supervisor resolves it
// through the host's handlers (Options.Elicitation, Sampling, Roots and
// Requests, or Options.Inputs for a whole round at once), sends the
// request again under a new id with the answers and the server's
// unchanged requestState, and returns only the final result. A request
// that cannot get its input ends with an *InputError.

// Errors of multi round-trip requests; an *InputError matches
// ErrInputRequired and its cause.
var (
	ErrInputRequired      = session.ErrInputRequired
	ErrTooManyInputRounds = session.ErrTooManyInputRounds
	ErrNoInputHandler     = session.ErrNoInputHandler
)

// MaxInputRounds bounds the input rounds of one request.
const MaxInputRounds = session.MaxInputRounds

// RequestOptions configure one request to a server.
type RequestOptions struct {
	// Capabilities, when set, are declared in the request's _meta in
	// place of the supervisor's own, to a server of the stateless era
	// (2026-07-28), which reads capabilities per request: a gateway
	// declares those of the client it serves, so that the server asks for
	// no input (and creates no task) that client cannot handle. A server
	// of a handshake era ignores them.
	Capabilities *protocol.ClientCapabilities
	// Meta is added to the request's _meta.
	Meta protocol.Meta
}

// GetPromptWith is GetPrompt with options.
func (s *Supervisor) GetPromptWith(ctx context.Context, name string, args map[string]string, o RequestOptions) (*protocol.GetPromptResult, error) {
	return hostResult(s.sys.GetPromptWith(ctx, name, args, actors.RequestOptions(o)))
}

// ReadResourceWith is ReadResource with options.
func (s *Supervisor) ReadResourceWith(ctx context.Context, server, uri string, o RequestOptions) (*protocol.ReadResourceResult, error) {
	return hostResult(s.sys.ReadResourceWith(ctx, server, uri, actors.RequestOptions(o)))
}

// Request sends a server a request the API has no method for (an
// extension's: tasks/get, skills/list, …) and returns its result raw;
// params is a JSON object or nil, and gets the request's _meta.
func (s *Supervisor) Request(ctx context.Context, server, method string, params json.RawMessage, o RequestOptions) (json.RawMessage, error) {
	return hostResult(s.sys.Request(ctx, server, method, params, actors.RequestOptions(o)))
}
