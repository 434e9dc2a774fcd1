package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// A host's own tools, resources and prompts, served beside the pool's.

// ErrInvalidFeature is wrapped by the error Features' Add methods return
// for a tool, resource or prompt that cannot be served: no name (or URI),
// no handler, a name reserved for the pool (mcp__…) or for the gateway's
// own tool, or an input schema that is not a JSON object.
var ErrInvalidFeature = errors.New("gateway: invalid host feature")

// ToolHandler serves a call of a host tool: args are the call's
// arguments as the client sent them (nil when it sent none). A failure
// of the tool belongs in the result (IsError); an error returned is
// answered as a JSON-RPC error (a *protocol.Error as it is, any other as
// an internal error). It runs on the goroutine serving the request,
// concurrently with other calls; ctx ends when the client cancels the
// call, its session ends or the gateway closes.
type ToolHandler func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error)

// ResourceHandler reads a host resource; like ToolHandler, it runs
// concurrently with other requests, and ctx ends with the request.
type ResourceHandler func(ctx context.Context, uri string) (*protocol.ReadResourceResult, error)

// PromptHandler renders a host prompt with the client's arguments; like
// ToolHandler, it runs concurrently with other requests, and ctx ends
// with the request.
type PromptHandler func(ctx context.Context, args map[string]string) (*protocol.GetPromptResult, error)

// Tool is a host tool: its definition (offered downstream under
// Definition.Name, unchanged) and its handler.
type Tool struct {
	Definition protocol.Tool
	Handler    ToolHandler
}

// Resource is a host resource, listed and read at Resource.URI.
type Resource struct {
	Resource protocol.Resource
	Handler  ResourceHandler
}

// Prompt is a host prompt, offered under Prompt.Name.
type Prompt struct {
	Prompt  protocol.Prompt
	Handler PromptHandler
}

// Features are a host's own tools, resources and prompts, which a
// Gateway serves beside its pool's (Options.Features). The zero value is
// an empty set, ready to use; a host may add and remove features before
// and while gateways serve it, and every gateway serving it tells its
// clients (list_changed).
//
// Downstream, host features come first: a host tool or prompt hides a
// pool tool or prompt offered under the same name, and a host resource
// a pool resource with the same URI. Options.Allow and Deny filter host
// tools as they filter the pool's.
//
// Concurrency: safe for concurrent use; mu guards every field. Handlers
// are called without mu held.
type Features struct {
	mu        sync.Mutex
	tools     map[string]Tool     // by name; guarded by mu
	resources map[string]Resource // by URI; guarded by mu
	prompts   map[string]Prompt   // by name; guarded by mu
	// watchers are told which list changed (a list_changed method);
	// gateways add theirs in New. Guarded by mu; called without it.
	watchers []func(method string)
}

// AddTool adds t, or replaces the host tool of the same name. A nil
// InputSchema becomes {"type":"object"}. It returns an error wrapping
// ErrInvalidFeature when t cannot be served.
func (f *Features) AddTool(t Tool) error {
	name := t.Definition.Name
	switch {
	case name == "":
		return fmt.Errorf("%w: a tool needs a name", ErrInvalidFeature)
	case t.Handler == nil:
		return fmt.Errorf("%w: tool %q has no handler", ErrInvalidFeature, name)
	case strings.HasPrefix(name, "mcp__"), name == waitToolName:
		return fmt.Errorf("%w: tool name %q is reserved for the pool", ErrInvalidFeature, name)
	}
	if len(t.Definition.InputSchema) == 0 {
		t.Definition.InputSchema = json.RawMessage(`{"type":"object"}`)
	} else if s := strings.TrimSpace(string(t.Definition.InputSchema)); !json.Valid(t.Definition.InputSchema) || !strings.HasPrefix(s, "{") {
		return fmt.Errorf("%w: tool %q: the input schema is not a JSON object", ErrInvalidFeature, name)
	}
	f.change(protocol.NotificationToolsListChanged, func() {
		if f.tools == nil {
			f.tools = map[string]Tool{}
		}
		f.tools[name] = t
	})
	return nil
}

// RemoveTool removes the host tool named name; it reports whether there
// was one.
func (f *Features) RemoveTool(name string) bool {
	return f.remove(protocol.NotificationToolsListChanged, func() bool {
		_, ok := f.tools[name]
		delete(f.tools, name)
		return ok
	})
}

// AddResource adds r, or replaces the host resource at the same URI. It
// returns an error wrapping ErrInvalidFeature when r cannot be served.
func (f *Features) AddResource(r Resource) error {
	switch {
	case r.Resource.URI == "":
		return fmt.Errorf("%w: a resource needs a URI", ErrInvalidFeature)
	case r.Handler == nil:
		return fmt.Errorf("%w: resource %q has no handler", ErrInvalidFeature, r.Resource.URI)
	}
	if r.Resource.Name == "" {
		r.Resource.Name = r.Resource.URI
	}
	f.change(protocol.NotificationResourcesListChanged, func() {
		if f.resources == nil {
			f.resources = map[string]Resource{}
		}
		f.resources[r.Resource.URI] = r
	})
	return nil
}

// RemoveResource removes the host resource at uri; it reports whether
// there was one.
func (f *Features) RemoveResource(uri string) bool {
	return f.remove(protocol.NotificationResourcesListChanged, func() bool {
		_, ok := f.resources[uri]
		delete(f.resources, uri)
		return ok
	})
}

// AddPrompt adds p, or replaces the host prompt of the same name. It
// returns an error wrapping ErrInvalidFeature when p cannot be served.
func (f *Features) AddPrompt(p Prompt) error {
	name := p.Prompt.Name
	switch {
	case name == "":
		return fmt.Errorf("%w: a prompt needs a name", ErrInvalidFeature)
	case p.Handler == nil:
		return fmt.Errorf("%w: prompt %q has no handler", ErrInvalidFeature, name)
	case strings.HasPrefix(name, "mcp__"):
		return fmt.Errorf("%w: prompt name %q is reserved for the pool", ErrInvalidFeature, name)
	}
	f.change(protocol.NotificationPromptsListChanged, func() {
		if f.prompts == nil {
			f.prompts = map[string]Prompt{}
		}
		f.prompts[name] = p
	})
	return nil
}

// RemovePrompt removes the host prompt named name; it reports whether
// there was one.
func (f *Features) RemovePrompt(name string) bool {
	return f.remove(protocol.NotificationPromptsListChanged, func() bool {
		_, ok := f.prompts[name]
		delete(f.prompts, name)
		return ok
	})
}

// change runs edit under mu, then tells the watchers that method's list
// changed.
func (f *Features) change(method string, edit func()) {
	f.mu.Lock()
	edit()
	watchers := slices.Clone(f.watchers)
	f.mu.Unlock()
	for _, w := range watchers {
		w(method)
	}
}

// remove runs del under mu and, when it removed something, tells the
// watchers.
func (f *Features) remove(method string, del func() bool) bool {
	f.mu.Lock()
	ok := del()
	watchers := slices.Clone(f.watchers)
	f.mu.Unlock()
	if ok {
		for _, w := range watchers {
			w(method)
		}
	}
	return ok
}

// watch adds a watcher of the lists' changes. A nil f has nothing to
// watch.
func (f *Features) watch(w func(method string)) {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.watchers = append(f.watchers, w)
	f.mu.Unlock()
}

// The lookups below are nil-safe: a gateway without Options.Features
// has none.

// toolList returns the host tools' definitions, by name.
func (f *Features) toolList() []protocol.Tool {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]protocol.Tool, 0, len(f.tools))
	for _, t := range f.tools {
		out = append(out, t.Definition)
	}
	slices.SortFunc(out, func(a, b protocol.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (f *Features) tool(name string) (Tool, bool) {
	if f == nil {
		return Tool{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tools[name]
	return t, ok
}

// resourceList returns the host resources, by URI.
func (f *Features) resourceList() []protocol.Resource {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]protocol.Resource, 0, len(f.resources))
	for _, r := range f.resources {
		out = append(out, r.Resource)
	}
	slices.SortFunc(out, func(a, b protocol.Resource) int { return strings.Compare(a.URI, b.URI) })
	return out
}

func (f *Features) resource(uri string) (Resource, bool) {
	if f == nil {
		return Resource{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.resources[uri]
	return r, ok
}

// promptList returns the host prompts, by name.
func (f *Features) promptList() []protocol.Prompt {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]protocol.Prompt, 0, len(f.prompts))
	for _, p := range f.prompts {
		out = append(out, p.Prompt)
	}
	slices.SortFunc(out, func(a, b protocol.Prompt) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (f *Features) prompt(name string) (Prompt, bool) {
	if f == nil {
		return Prompt{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.prompts[name]
	return p, ok
}

// callHostTool serves a call of host tool t.
func callHostTool(ctx context.Context, t Tool, args json.RawMessage) (any, *protocol.Error) {
	res, err := t.Handler(ctx, args)
	if err != nil {
		return nil, rpcError(err)
	}
	if res == nil {
		res = &protocol.CallToolResult{}
	}
	if res.Content == nil {
		res.Content = []protocol.Content{}
	}
	return res, nil
}
