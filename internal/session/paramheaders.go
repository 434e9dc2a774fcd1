package session

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Tool parameters mirrored into HTTP headers (SEP-2243). Over a transport
// that carries request headers (Streamable HTTP in the stateless era),
// Lists.Tools reads each tool's x-mcp-header annotations: a tool whose
// annotations are invalid is left out of the list (with a warning naming
// it and the reason), so that one malformed definition hides no other
// tool; the valid ones are kept by tool name, and CallTool sends the
// designated arguments as Mcp-Param-* headers. Other transports ignore
// the annotations, as the revision allows.

// paramHeaders is the table of the tools' mirrored parameters.
//
// Concurrency: table is replaced whole by each Lists.Tools (on the lister's
// goroutine) and read by every CallTool; conn is set by Open.
type paramHeaders struct {
	conn transports.Conn
	log  zerolog.Logger
	// table maps a tool's name to its mirrored parameters, for the tools
	// that have some.
	table atomic.Pointer[map[string][]protocol.ParamHeader]
}

// carried reports whether the connection sends request headers.
func (p *paramHeaders) carried() bool {
	hc, ok := p.conn.(transports.HeaderCarrier)
	return ok && hc.CarriesRequestHeaders()
}

// keep drops the tools with invalid annotations from tools (in place)
// and records the mirrored parameters of the others.
func (p *paramHeaders) keep(tools []protocol.Tool) []protocol.Tool {
	if !p.carried() {
		return tools
	}
	var table map[string][]protocol.ParamHeader
	kept := tools[:0]
	for _, t := range tools {
		hs, err := protocol.ParamHeaders(t.InputSchema)
		if err != nil {
			p.log.Warn().Str("tool", t.Name).Err(err).Msg("tool left out: its x-mcp-header annotations are invalid")
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
	p.table.Store(&table)
	return kept
}

// with returns ctx carrying the Mcp-Param-* headers of a call
// of tool name with args, or an error matching
// protocol.ErrParamHeaderValue when an argument cannot be mirrored.
func (p *paramHeaders) with(ctx context.Context, name string, args json.RawMessage) (context.Context, error) {
	table := p.table.Load()
	if table == nil || len(*table) == 0 || !p.carried() {
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
