package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Re-issue of a request whose response stream broke (2026-07-28).
//
// The stateless era has no stream resumption: "A broken response stream
// loses the in-flight request; clients MUST re-issue it as a new request
// with a new request ID" (2026-07-28 changelog, SEP-2575). The server may
// have processed the lost request, so the session re-issues, once, only
// what is safe to run twice:
//
//   - the reads: tools/list, prompts/list, resources/list,
//     resources/templates/list, resources/read, prompts/get,
//     completion/complete, ping and server/discover;
//   - tools/call of a tool whose annotations (from the latest Lists.Tools)
//     say readOnlyHint. The schema calls idempotentHint "meaningful only
//     when readOnlyHint == false": a tool that does not modify its
//     environment has no effect to repeat, so readOnlyHint alone decides.
//
// Everything else fails as before, with an error matching
// transports.ErrStreamBroken. A re-issued request whose stream breaks
// again fails the same way (its error says it was re-issued); it is not
// sent a third time. A handshake-era server's streams are resumed by the
// transport instead (Last-Event-ID), and only its server/discover probe
// counts as a stateless-era request here.

// reissuableMethods are the requests re-issued whatever their params.
var reissuableMethods = map[string]bool{
	protocol.MethodToolsList:              true,
	protocol.MethodPromptsList:            true,
	protocol.MethodResourcesList:          true,
	protocol.MethodResourcesTemplatesList: true,
	protocol.MethodResourcesRead:          true,
	protocol.MethodPromptsGet:             true,
	protocol.MethodCompletionComplete:     true,
	protocol.MethodPing:                   true,
	protocol.MethodDiscover:               true,
}

// reissue decides which requests are re-issued, and counts them.
//
// Concurrency: readOnly is replaced whole by each Lists.Tools and read by
// every request whose stream broke; count is atomic.
type reissue struct {
	// readOnly holds the names of the tools whose annotations say
	// readOnlyHint.
	readOnly atomic.Pointer[map[string]bool]
	count    atomic.Int64 // requests re-issued after their stream broke
}

// exchange sends a request under a new id and waits for its answer (see
// roundTripID), re-issuing it once under another new id when its
// response stream broke and the request may be re-issued.
func (s *Session) exchange(ctx context.Context, method string, params any, answerWithin time.Duration) (json.RawMessage, error) {
	raw, err := s.roundTripID(ctx, s.core.nextID.Add(1), method, params, answerWithin)
	if err == nil || !errors.Is(err, transports.ErrStreamBroken) || ctx.Err() != nil || !s.reissue.may(s.meta.modern != nil, method, params) {
		return raw, err
	}
	s.reissue.count.Add(1)
	s.core.log.Debug().Str("method", method).Err(err).Msg("response stream broke; re-issuing the request under a new id")
	raw, err = s.roundTripID(ctx, s.core.nextID.Add(1), method, params, answerWithin)
	if err != nil && errors.Is(err, transports.ErrStreamBroken) {
		return nil, fmt.Errorf("%w (the request was re-issued once under a new id)", err)
	}
	return raw, err
}

// may reports whether request method with params, of a stateless-era
// session (modern) or not, may be sent again after its response stream
// broke.
func (r *reissue) may(modern bool, method string, params any) bool {
	if !modern && method != protocol.MethodDiscover {
		return false // a handshake-era session: the transport resumes streams
	}
	if reissuableMethods[method] {
		return true
	}
	if method != protocol.MethodToolsCall {
		return false
	}
	ro := r.readOnly.Load()
	return ro != nil && (*ro)[toolNameOf(params)]
}

// toolNameOf returns the tool name of tools/call params as the session
// builds them.
func toolNameOf(params any) string {
	switch p := params.(type) {
	case protocol.CallToolParams:
		return p.Name
	case protocol.ValidJSON:
		name, _ := protocol.PlainStringMember(p, "name")
		return name
	}
	return ""
}

// keep records which of tools say readOnlyHint, for may.
func (r *reissue) keep(tools []protocol.Tool) {
	ro := make(map[string]bool)
	for _, t := range tools {
		if a := t.Annotations; a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint {
			ro[t.Name] = true
		}
	}
	r.readOnly.Store(&ro)
}
