package mcpvisor

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Server-to-client requests: roots/list, sampling/createMessage and
// elicitation/create, answered by the host's handlers in Options.

// defaultServerRequestTimeout bounds one host handler.
const defaultServerRequestTimeout = 2 * time.Minute

// clientCapabilities is what the client declares: Options.Capabilities,
// plus roots, sampling and elicitation for the handlers the host
// registered (and only for those: a capability promises answers).
func clientCapabilities(o *Options) protocol.ClientCapabilities {
	caps := o.Capabilities
	if o.Roots != nil && caps.Roots == nil {
		caps.Roots = &protocol.RootsCapability{ListChanged: true}
	}
	if o.Sampling != nil && caps.Sampling == nil {
		raw := json.RawMessage(`{}`)
		caps.Sampling = &raw
	}
	if o.Elicitation != nil && caps.Elicitation == nil {
		raw := json.RawMessage(`{"form":{}}`)
		if o.ElicitationURL {
			raw = json.RawMessage(`{"form":{},"url":{}}`)
		}
		caps.Elicitation = &raw
	}
	return caps
}

// requestHandler answers server's requests: the typed handlers first, then
// Options.Requests; nil when there is nothing to answer with (the session
// then answers method-not-found; ping is always answered).
func requestHandler(o *runOptions, server string) session.RequestHandler {
	if o.Roots == nil && o.Sampling == nil && o.Elicitation == nil && o.Requests == nil {
		return nil
	}
	return func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch {
		case method == protocol.MethodRootsList && o.Roots != nil && o.host != nil:
			return protocol.ListRootsResult{Roots: o.host.roots.get()}, nil
		case method == protocol.MethodSamplingCreateMessage && o.Sampling != nil:
			var req protocol.CreateMessageParams
			if err := json.Unmarshal(params, &req); err != nil {
				return nil, protocol.NewError(protocol.CodeInvalidParams, "%v", err)
			}
			return o.Sampling(ctx, server, &req)
		case method == protocol.MethodElicitationCreate && o.Elicitation != nil:
			return elicit(ctx, &o.Options, server, params)
		case o.Requests != nil:
			return o.Requests(ctx, server, method, params)
		}
		return nil, protocol.NewError(protocol.CodeMethodNotFound, "mcpvisor's host does not handle %q", method)
	}
}

// elicit runs the host's elicitation handler and fills a form accepted
// without values with the schema's defaults.
func elicit(ctx context.Context, o *Options, server string, params json.RawMessage) (any, error) {
	var req protocol.ElicitParams
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "%v", err)
	}
	url := req.Mode == "url"
	if url && !o.ElicitationURL {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "URL elicitation was not declared")
	}
	res, err := o.Elicitation(ctx, server, &req)
	if err != nil || res == nil || url || res.Action != protocol.ElicitAccept {
		if err == nil && res == nil {
			return protocol.ElicitResult{Action: protocol.ElicitCancel}, nil
		}
		return res, err
	}
	defaults, derr := protocol.ElicitationDefaults(req.RequestedSchema)
	if derr != nil {
		return res, nil // the host accepted it as it is
	}
	for k, v := range defaults {
		if _, ok := res.Content[k]; !ok {
			if res.Content == nil {
				res.Content = map[string]json.RawMessage{}
			}
			res.Content[k] = v
		}
	}
	return res, nil
}

// rootsState holds the roots the host exposes.
//
// Concurrency: mu guards roots; the host sets them, sessions read them.
type rootsState struct {
	mu    sync.Mutex
	roots []protocol.Root
}

func newRootsState(roots []protocol.Root) *rootsState {
	return &rootsState{roots: append([]protocol.Root{}, roots...)}
}

func (r *rootsState) get() []protocol.Root {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.Root{}, r.roots...)
}
