package session

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Tool parameters mirrored into HTTP headers (SEP-2243). Over a transport
// that carries request headers (Streamable HTTP in the stateless era),
// ListTools reads each tool's x-mcp-header annotations: a tool whose
// annotations are invalid is left out of the list (with a warning naming
// it and the reason), so that one malformed definition hides no other
// tool; the valid ones are kept by tool name, and CallTool sends the
// designated arguments as Mcp-Param-* headers. Other transports ignore
// the annotations, as the revision allows.

// carriesHeaders reports whether the connection sends request headers.
func (s *Session) carriesHeaders() bool {
	hc, ok := s.conn.(transports.HeaderCarrier)
	return ok && hc.CarriesRequestHeaders()
}

// keepParamHeaders drops the tools with invalid annotations from tools
// (in place) and records the mirrored parameters of the others.
func (s *Session) keepParamHeaders(tools []protocol.Tool) []protocol.Tool {
	if !s.carriesHeaders() {
		return tools
	}
	var table map[string][]protocol.ParamHeader
	kept := tools[:0]
	for _, t := range tools {
		hs, err := protocol.ParamHeaders(t.InputSchema)
		if err != nil {
			s.log.Warn().Str("tool", t.Name).Err(err).Msg("tool left out: its x-mcp-header annotations are invalid")
			continue
		}
		if len(hs) > 0 {
			if table == nil {
				table = map[string][]protocol.ParamHeader{}
			}
			table[t.Name] = hs
		}
		kept = append(kept, t)
	}
	clear(tools[len(kept):]) // no references kept past the slice's end
	s.paramHeaders.Store(&table)
	return kept
}

// withParamHeaders returns ctx carrying the Mcp-Param-* headers of a call
// of tool name with args, or an error matching
// protocol.ErrParamHeaderValue when an argument cannot be mirrored.
func (s *Session) withParamHeaders(ctx context.Context, name string, args json.RawMessage) (context.Context, error) {
	table := s.paramHeaders.Load()
	if table == nil || len(*table) == 0 || !s.carriesHeaders() {
		return ctx, nil
	}
	hs := (*table)[name]
	if len(hs) == 0 {
		return ctx, nil
	}
	values, err := protocol.ParamHeaderValues(hs, args)
	if err != nil {
		return ctx, fmt.Errorf("%s %q: %w", protocol.MethodToolsCall, name, err)
	}
	out := make([]transports.Header, len(values))
	for i, v := range values {
		out[i] = transports.Header{Name: v.Header, Value: v.Value}
	}
	return transports.WithRequestHeaders(ctx, out), nil
}
