package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// A call that needs approval (an ask rule, or a server whose trust is
// "untrusted"; see mcpvisor.PermissionRules) is put to the client that
// made it, by form elicitation: the client shows the tool, the server and
// the arguments, and the user accepts or declines. Only that client is
// asked, never another one; a client that did not declare elicitation
// (form) cannot approve, and the call is refused with
// mcpvisor.ErrApprovalUnavailable, which reaches the client as a
// CodeCallRefused error saying why.

// ErrNoElicitation: the client that made the call declared no form
// elicitation, so it cannot be asked to approve it.
var ErrNoElicitation = errors.New("the client declared no elicitation to ask for approval with")

// approvalSchema is the form an approval asks for: one boolean.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Allow this call","default":false}},"required":["approve"]}`)

// ApproveCall asks the client whose tools/call ctx serves to approve
// req, by form elicitation (an Options.ApproveCall). It returns true when
// the user accepted with approve true, false when they declined,
// cancelled or said no, and an error when the client cannot be asked
// (ErrNoElicitation; no call of a downstream client in ctx) or did not
// answer.
func (g *Gateway) ApproveCall(ctx context.Context, req mcpvisor.CallApproval) (ok bool, err error) {
	c := callOf(ctx)
	if c == nil {
		return false, errors.New("no downstream client's call to ask about")
	}
	defer func(start time.Time) { g.trail.auditApproval(ctx, c.s, req.Tool, req.Server, start, ok, err) }(time.Now())
	if !c.answers(protocol.MethodElicitationCreate, false) {
		return false, ErrNoElicitation
	}
	args := string(req.Arguments)
	if args == "" {
		args = "{}"
	}
	const maxArgs = 2000
	if len(args) > maxArgs {
		args = args[:maxArgs] + "…"
	}
	params, err := json.Marshal(protocol.ElicitParams{
		Message: fmt.Sprintf("Allow the call of tool %q of server %q (%s)? Arguments: %s",
			req.ServerTool, req.Server, req.Reason, args),
		RequestedSchema: approvalSchema,
	})
	if err != nil {
		return false, err
	}
	raw, err := g.ClientRequest(ctx, c.server, protocol.MethodElicitationCreate, params)
	if err != nil {
		return false, fmt.Errorf("asking the client for approval: %w", err)
	}
	b, _ := raw.(json.RawMessage)
	var res protocol.ElicitResult
	if err := json.Unmarshal(b, &res); err != nil {
		return false, fmt.Errorf("the client's answer to the approval: %w", err)
	}
	if res.Action != protocol.ElicitAccept {
		return false, nil
	}
	var approve bool
	if v, ok := res.Content["approve"]; ok && json.Unmarshal(v, &approve) == nil {
		return approve, nil
	}
	return false, nil
}

// ApproveCall asks the attached gateway's client (Gateway.ApproveCall);
// before Attach nothing can be asked.
func (f *Forwarder) ApproveCall(ctx context.Context, req mcpvisor.CallApproval) (bool, error) {
	g := f.g.Load()
	if g == nil {
		return false, errors.New("no gateway to ask through")
	}
	return g.ApproveCall(ctx, req)
}
