package session

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Lists are the server's catalogue as a session reads it: the paginated
// listings of tools, resources, resource templates, prompts and skills,
// and the caching hints they came with. Reach them with Session.Lists.
// Listing tools also refreshes what the session keeps per tool (the
// read-only tools it may re-issue, the parameters it mirrors in headers).
//
// Concurrency: every exported method is safe for concurrent use; hints is
// guarded by mu (the negotiation writes hints.Discover before Open
// returns).
type Lists struct {
	s *Session

	mu    sync.Mutex
	hints protocol.CacheHints // guarded by mu
}

// Lists returns the session's listings.
func (s *Session) Lists() *Lists { return &s.lists }

// Tools lists every tool, following pagination. A server that did not
// declare the tools capability is still asked (many real servers forget to
// declare it); method-not-found then means no tools.
func (ls *Lists) Tools(ctx context.Context) ([]protocol.Tool, error) {
	s := ls.s
	tools, err := listAll(ctx, ls, protocol.MethodToolsList, func(r *protocol.ListToolsResult) ([]protocol.Tool, string, protocol.CacheHint) {
		return r.Tools, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
	if err != nil && s.peer.Capabilities.Tools == nil && isMethodNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.reissue.keep(tools)
	return s.headers.keep(tools), nil
}

// Resources lists every resource, or nothing when the server has no
// resources capability.
func (ls *Lists) Resources(ctx context.Context) ([]protocol.Resource, error) {
	if ls.s.peer.Capabilities.Resources == nil {
		return nil, nil
	}
	return listAll(ctx, ls, protocol.MethodResourcesList, func(r *protocol.ListResourcesResult) ([]protocol.Resource, string, protocol.CacheHint) {
		return r.Resources, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
}

// ResourceTemplates lists every resource template, or nothing when the
// server has no resources capability.
func (ls *Lists) ResourceTemplates(ctx context.Context) ([]protocol.ResourceTemplate, error) {
	if ls.s.peer.Capabilities.Resources == nil {
		return nil, nil
	}
	return listAll(ctx, ls, protocol.MethodResourcesTemplatesList, func(r *protocol.ListResourceTemplatesResult) ([]protocol.ResourceTemplate, string, protocol.CacheHint) {
		return r.ResourceTemplates, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
}

// Prompts lists every prompt, or nothing when the server has no
// prompts capability.
func (ls *Lists) Prompts(ctx context.Context) ([]protocol.Prompt, error) {
	if ls.s.peer.Capabilities.Prompts == nil {
		return nil, nil
	}
	return listAll(ctx, ls, protocol.MethodPromptsList, func(r *protocol.ListPromptsResult) ([]protocol.Prompt, string, protocol.CacheHint) {
		return r.Prompts, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
}

// listAll follows nextCursor until the last page. A cursor seen twice, or
// more than maxPages pages, is an error rather than a loop. The strictest
// caching hint of the pages is recorded (Hints).
func listAll[R any, T any](ctx context.Context, ls *Lists, method string, page func(*R) ([]T, string, protocol.CacheHint)) ([]T, error) {
	var all []T
	var hint protocol.CacheHint
	var seen map[string]bool // cursors already followed; most lists have one page
	cursor := ""
	for n := 0; ; n++ {
		if n == maxPages {
			return nil, fmt.Errorf("%w: %s returned more than %d pages", ErrMalformedResponse, method, maxPages)
		}
		var res R
		if err := ls.s.Call(ctx, method, ls.params(cursor), &res); err != nil {
			return nil, err
		}
		items, next, h := page(&res)
		all = append(all, items...)
		if n == 0 {
			hint = h
		} else {
			hint = hint.Stricter(h)
		}
		if next == "" {
			ls.setHint(method, hint)
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%w: %s repeated cursor %q", ErrMalformedResponse, method, next)
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[next] = true
		cursor = next
	}
}

// params encodes the params of a list request. In the stateless
// era they carry the session's _meta, encoded once at negotiation, so
// that the lists of a connect (four at once, and again on every
// list_changed) do not each encode the _meta map anew.
func (ls *Lists) params(cursor string) any {
	meta := ls.s.meta.statelessJSON()
	if meta == nil {
		return protocol.PaginatedParams{Cursor: cursor}
	}
	b := make([]byte, 0, len(meta)+len(cursor)+24)
	b = append(b, `{"_meta":`...)
	b = append(b, meta...)
	if cursor != "" {
		b = append(b, `,"cursor":`...)
		b = protocol.AppendString(b, cursor)
	}
	return protocol.ValidJSON(append(b, '}'))
}

// Hints returns the server's caching hints: those of server/discover and
// of the last complete listing of each kind.
func (ls *Lists) Hints() protocol.CacheHints {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.hints
}

// setHint records the hint of a complete listing of method.
func (ls *Lists) setHint(method string, h protocol.CacheHint) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch method {
	case protocol.MethodToolsList:
		ls.hints.Tools = h
	case protocol.MethodPromptsList:
		ls.hints.Prompts = h
	case protocol.MethodResourcesList:
		ls.hints.Resources = h
	case protocol.MethodResourcesTemplatesList:
		ls.hints.Templates = h
	case protocol.MethodDiscover:
		ls.hints.Discover = h
	}
}
