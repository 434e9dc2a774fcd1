package mcpvisor

import (
	"context"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// SamplingHandler answers a server's sampling/createMessage
// (Options.Sampling); setting one declares the sampling capability.
//
// Concurrency: each request runs on a goroutine of its own; requests of
// several servers, or several of one, may run at once.
//
// It runs the request on the host's model (after whatever review the host
// wants) and returns the model's message, in its own goroutine, with a
// context that ends after Options.ServerRequestTimeout or when the
// connection does. An error is sent to the server (a *protocol.Error as
// is, anything else as an internal error).
type SamplingHandler func(ctx context.Context, server string, req *protocol.CreateMessageParams) (*protocol.CreateMessageResult, error)

// ElicitationHandler answers a server's elicitation/create
// (Options.Elicitation); setting one declares the elicitation capability.
//
// Concurrency: like SamplingHandler, each request runs on a goroutine
// of its own, and several may run at once.
// A form accepted without values gets the schema's defaults.
// It answers a form (req.Mode "form" or empty, with RequestedSchema) or,
// when Options.ElicitationURL is set, a URL the user must visit (req.Mode
// "url"), in its own goroutine with a bounded context.
type ElicitationHandler func(ctx context.Context, server string, req *protocol.ElicitParams) (*protocol.ElicitResult, error)

// CallOptions configure one tool call (CallToolWith).
type CallOptions struct {
	// Progress, when set, asks the server for progress reports (a
	// progress token in the request's _meta) and receives them, in order,
	// on a goroutine of the call's own, never after the call returned.
	// Reports the callback falls behind on are dropped (the event stream
	// still has them as ProgressEvents).
	Progress func(protocol.ProgressParams)
	// Meta is added to the request's _meta.
	Meta protocol.Meta
	// Capabilities, when set, are declared in this request's _meta in
	// place of the supervisor's own (stateless-era servers only; see
	// RequestOptions.Capabilities).
	Capabilities *protocol.ClientCapabilities
}

// CallToolWith is CallTool with options (progress reports, _meta).
// Cancelling ctx abandons the call and sends the server
// notifications/cancelled.
func (s *Supervisor) CallToolWith(ctx context.Context, name string, args any, o CallOptions) (*protocol.CallToolResult, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("mcpvisor: arguments of %s: %w", name, err)
	}
	return s.callToolWith(ctx, name, raw, o)
}
