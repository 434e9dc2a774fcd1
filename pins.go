package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/trust"
)

// PinOptions configure tool pinning (Options.ToolPins). The zero value
// pins nothing.
type PinOptions struct {
	// Store keeps the pins. Nil turns pinning off: every tool a server
	// lists is offered, as before pinning existed.
	Store PinStore

	// Trusted is the action for the tools of servers marked
	// trust: "trusted" (the user vouches for the server): empty means
	// PinOffer. Untrusted is the action for every other server: empty
	// means PinWithhold.
	Trusted, Untrusted PinAction
}

// PinStore keeps tool pins: what each tool's definition was when the user
// started relying on it. *trust.Store implements it (see
// trust.Store.CheckTools for the contract).
//
// Concurrency: CheckTools is called from many servers' goroutines at
// once.
type PinStore interface {
	// CheckTools compares the tools server (running identity) lists with
	// their pins, pins them when the server is new, records the changes
	// for review, and returns one check per tool, in order.
	CheckTools(ctx context.Context, server, identity string, tools []protocol.Tool) ([]trust.ToolCheck, error)
}

// PinAction is what becomes of a tool whose definition is not pinned (it
// changed since it was pinned, or it is new on a server seen before).
type PinAction string

// The pin actions.
const (
	// PinWithhold keeps the tool out of the pool (it is not listed and a
	// call to it is ErrUnknownTool) until the user approves its
	// definition.
	PinWithhold PinAction = "withhold"
	// PinOffer offers the tool all the same; the event and the pending
	// review say what changed.
	PinOffer PinAction = "offer"
)
