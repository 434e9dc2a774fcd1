package mcpvisor

import (
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
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
