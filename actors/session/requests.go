package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// CallTool calls tool name with args (a JSON object, or nil). A tool that
// failed is a result with IsError set, not an error.
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage, meta protocol.Meta) (*protocol.CallToolResult, error) {
	var params any
	if meta == nil {
		// The hot path: the params are assembled from bytes, with the
		// stateless-era _meta encoded once per session, not per call.
		if args != nil && !json.Valid(args) {
			return nil, fmt.Errorf("%s: arguments are not valid JSON", protocol.MethodToolsCall)
		}
		params = callToolParams(s.modernMetaJSON, name, args)
	} else {
		params = protocol.CallToolParams{Meta: s.requestMeta(meta), Name: name, Arguments: args}
	}
	ctx, err := s.withParamHeaders(ctx, name, args)
	if err != nil {
		return nil, err
	}
	var res protocol.CallToolResult
	if err := s.Call(ctx, protocol.MethodToolsCall, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// callToolParams encodes tools/call params: {"_meta":…,"name":…,"arguments":…}.
func callToolParams(meta json.RawMessage, name string, args json.RawMessage) protocol.ValidJSON {
	b := make([]byte, 0, len(meta)+len(name)+len(args)+40)
	b = append(b, '{')
	if meta != nil {
		b = append(b, `"_meta":`...)
		b = append(b, meta...)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = protocol.AppendString(b, name)
	if args != nil {
		b = append(b, `,"arguments":`...)
		b = append(b, args...)
	}
	return append(b, '}')
}

// ReadResource reads the resource at uri.
func (s *Session) ReadResource(ctx context.Context, uri string) (*protocol.ReadResourceResult, error) {
	var res protocol.ReadResourceResult
	params := protocol.ReadResourceParams{Meta: s.requestMeta(nil), URI: uri}
	if err := s.Call(ctx, protocol.MethodResourcesRead, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// GetPrompt renders prompt name with args.
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string) (*protocol.GetPromptResult, error) {
	var res protocol.GetPromptResult
	params := protocol.GetPromptParams{Meta: s.requestMeta(nil), Name: name, Arguments: args}
	if err := s.Call(ctx, protocol.MethodPromptsGet, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Ping checks that the server answers. The stateless era has no ping, so
// there it asks server/discover, which every such server must answer.
func (s *Session) Ping(ctx context.Context) error {
	if s.modernMeta != nil {
		return s.Call(ctx, protocol.MethodDiscover, protocol.DiscoverParams{Meta: s.modernMeta}, nil)
	}
	return s.Call(ctx, protocol.MethodPing, nil, nil)
}

// ListenOutcome says how a subscriptions/listen stream went.
type ListenOutcome struct {
	// Acknowledged is true when the server acknowledged the subscription
	// (notifications/subscriptions/acknowledged) while the stream was open.
	Acknowledged bool
	// Completed is true when the server ended the stream gracefully with
	// a result, rather than by dropping it.
	Completed bool
}

// Listen holds a subscriptions/listen request (2026-07-28) open until the
// server ends it or ctx ends. The notifications it selects arrive through
// the Handler like any other. In the handshake eras there is nothing to
// listen to: Listen fails with ErrVersionMismatch.
func (s *Session) Listen(ctx context.Context, subs protocol.NotificationSubscriptions) (ListenOutcome, error) {
	if s.modernMeta == nil {
		return ListenOutcome{}, fmt.Errorf("%w: subscriptions/listen needs protocol version %s, the session speaks %s", ErrVersionMismatch, protocol.Version20260728, s.version)
	}
	before := s.acks.Load()
	s.listening.Add(1)
	defer s.listening.Add(-1)
	err := s.Call(ctx, protocol.MethodSubscriptionsListen, protocol.SubscriptionsListenParams{Meta: s.modernMeta, Notifications: subs}, nil)
	return ListenOutcome{Acknowledged: s.acks.Load() > before, Completed: err == nil}, err
}

// ListTools lists every tool, following pagination. A server that did not
// declare the tools capability is still asked (many real servers forget to
// declare it); method-not-found then means no tools.
func (s *Session) ListTools(ctx context.Context) ([]protocol.Tool, error) {
	tools, err := listAll(ctx, s, protocol.MethodToolsList, func(r *protocol.ListToolsResult) ([]protocol.Tool, string) {
		return r.Tools, r.NextCursor
	})
	if err != nil && s.capabilities.Tools == nil && isMethodNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.keepParamHeaders(tools), nil
}

// ListResources lists every resource, or nothing when the server has no
// resources capability.
func (s *Session) ListResources(ctx context.Context) ([]protocol.Resource, error) {
	if s.capabilities.Resources == nil {
		return nil, nil
	}
	return listAll(ctx, s, protocol.MethodResourcesList, func(r *protocol.ListResourcesResult) ([]protocol.Resource, string) {
		return r.Resources, r.NextCursor
	})
}

// ListResourceTemplates lists every resource template, or nothing when the
// server has no resources capability.
func (s *Session) ListResourceTemplates(ctx context.Context) ([]protocol.ResourceTemplate, error) {
	if s.capabilities.Resources == nil {
		return nil, nil
	}
	return listAll(ctx, s, protocol.MethodResourcesTemplatesList, func(r *protocol.ListResourceTemplatesResult) ([]protocol.ResourceTemplate, string) {
		return r.ResourceTemplates, r.NextCursor
	})
}

// ListPrompts lists every prompt, or nothing when the server has no
// prompts capability.
func (s *Session) ListPrompts(ctx context.Context) ([]protocol.Prompt, error) {
	if s.capabilities.Prompts == nil {
		return nil, nil
	}
	return listAll(ctx, s, protocol.MethodPromptsList, func(r *protocol.ListPromptsResult) ([]protocol.Prompt, string) {
		return r.Prompts, r.NextCursor
	})
}

// listAll follows nextCursor until the last page. A cursor seen twice, or
// more than maxPages pages, is an error rather than a loop.
func listAll[R any, T any](ctx context.Context, s *Session, method string, page func(*R) ([]T, string)) ([]T, error) {
	var all []T
	var seen map[string]bool // cursors already followed; most lists have one page
	cursor := ""
	for n := 0; ; n++ {
		if n == maxPages {
			return nil, fmt.Errorf("%w: %s returned more than %d pages", ErrMalformedResponse, method, maxPages)
		}
		var res R
		if err := s.Call(ctx, method, s.paginatedParams(cursor), &res); err != nil {
			return nil, err
		}
		items, next := page(&res)
		all = append(all, items...)
		if next == "" {
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

// paginatedParams encodes the params of a list request. In the stateless
// era they carry the session's _meta, encoded once at negotiation, so
// that the lists of a connect (four at once, and again on every
// list_changed) do not each encode the _meta map anew.
func (s *Session) paginatedParams(cursor string) any {
	if s.modernMetaJSON == nil {
		return protocol.PaginatedParams{Meta: s.requestMeta(nil), Cursor: cursor}
	}
	b := make([]byte, 0, len(s.modernMetaJSON)+len(cursor)+24)
	b = append(b, `{"_meta":`...)
	b = append(b, s.modernMetaJSON...)
	if cursor != "" {
		b = append(b, `,"cursor":`...)
		b = protocol.AppendString(b, cursor)
	}
	return protocol.ValidJSON(append(b, '}'))
}

func isMethodNotFound(err error) bool {
	var rpcErr *protocol.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeMethodNotFound
}
