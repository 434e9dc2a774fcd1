package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// CallTool calls tool name with args (a JSON object, or nil), with meta
// added to the request's _meta. A tool that failed is a result with
// IsError set, not an error.
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage, meta protocol.Meta) (*protocol.CallToolResult, error) {
	return s.CallToolWith(ctx, name, args, RequestOptions{Meta: meta})
}

// CallToolWith is CallTool with options. A server that answers with an
// InputRequiredResult gets its input (see mrtr.go) and the call goes on;
// the result returned is the final one. A result of the tasks extension
// (resultType "task") is returned as it is: only a call whose
// capabilities declare the extension can get one.
func (s *Session) CallToolWith(ctx context.Context, name string, args json.RawMessage, o RequestOptions) (*protocol.CallToolResult, error) {
	if args != nil && !json.Valid(args) {
		return nil, fmt.Errorf("%s: arguments are not valid JSON", protocol.MethodToolsCall)
	}
	var first any
	switch {
	case o.Meta == nil && (o.Capabilities == nil || s.modernMeta == nil):
		// The hot path: the params are assembled from bytes, with the
		// stateless-era _meta encoded once per session, not per call.
		first = callToolParams(s.statelessMetaJSON(), name, args)
	case o.Meta == nil:
		// A gateway's call, declaring its client's capabilities: their
		// _meta is encoded once for as long as they stay the same.
		meta, err := s.metaWithCaps(o.Capabilities)
		if err != nil {
			return nil, fmt.Errorf("%s: encoding _meta: %w", protocol.MethodToolsCall, err)
		}
		first = callToolParams(meta, name, args)
	default:
		first = protocol.CallToolParams{Meta: s.optionsMeta(o), Name: name, Arguments: args}
	}
	ctx, err := s.withParamHeaders(ctx, name, args)
	if err != nil {
		return nil, err
	}
	var res protocol.CallToolResult
	retry := func(m protocol.MRTRParams) any {
		p := protocol.CallToolParams{Meta: s.optionsMeta(o), Name: name, Arguments: args, RequestState: m.RequestState}
		p.InputResponses = encodeInputs(m.InputResponses)
		return p
	}
	if err := typed(ctx, s, protocol.MethodToolsCall, first, retry, &res, func() string { return res.ResultType }); err != nil {
		return nil, err
	}
	return &res, nil
}

// typed runs a multi round-trip request whose answers decode into res:
// each answer is decoded (into a reset res) and its resultType, read by
// resultType, says whether it asks for input. An answer that does not
// decode ends the request with ErrMalformedResponse.
func typed[R any](ctx context.Context, s *Session, method string, first any, retry func(protocol.MRTRParams) any, res *R, resultType func() string) error {
	var decodeErr error
	_, err := s.mrtr(ctx, method, first, retry, func(raw json.RawMessage) bool {
		var zero R
		*res = zero
		if decodeErr = protocol.Unmarshal(raw, res); decodeErr != nil {
			return false
		}
		return resultType() == protocol.ResultInputRequired
	})
	if err == nil && decodeErr != nil {
		err = fmt.Errorf("%w: %s result: %v", ErrMalformedResponse, method, decodeErr)
	}
	return err
}

// encodeInputs encodes the answers of an input round; nil stays nil (the
// retry then carries no inputResponses).
func encodeInputs(in protocol.InputResponses) json.RawMessage {
	if in == nil {
		return nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil
	}
	return raw
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
	return s.ReadResourceWith(ctx, uri, RequestOptions{})
}

// ReadResourceWith is ReadResource with options; like CallToolWith, it
// resolves the server's input rounds.
func (s *Session) ReadResourceWith(ctx context.Context, uri string, o RequestOptions) (*protocol.ReadResourceResult, error) {
	var res protocol.ReadResourceResult
	params := func(m protocol.MRTRParams) any {
		return protocol.ReadResourceParams{Meta: s.optionsMeta(o), URI: uri, InputResponses: encodeInputs(m.InputResponses), RequestState: m.RequestState}
	}
	if err := typed(ctx, s, protocol.MethodResourcesRead, params(protocol.MRTRParams{}), params, &res, func() string { return res.ResultType }); err != nil {
		return nil, err
	}
	return &res, nil
}

// GetPrompt renders prompt name with args.
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string) (*protocol.GetPromptResult, error) {
	return s.GetPromptWith(ctx, name, args, RequestOptions{})
}

// GetPromptWith is GetPrompt with options; like CallToolWith, it resolves
// the server's input rounds.
func (s *Session) GetPromptWith(ctx context.Context, name string, args map[string]string, o RequestOptions) (*protocol.GetPromptResult, error) {
	var res protocol.GetPromptResult
	params := func(m protocol.MRTRParams) any {
		return protocol.GetPromptParams{Meta: s.optionsMeta(o), Name: name, Arguments: args, InputResponses: encodeInputs(m.InputResponses), RequestState: m.RequestState}
	}
	if err := typed(ctx, s, protocol.MethodPromptsGet, params(protocol.MRTRParams{}), params, &res, func() string { return res.ResultType }); err != nil {
		return nil, err
	}
	return &res, nil
}

// Ping checks that the server answers. The stateless era has no ping, so
// there it asks server/discover, which every such server must answer.
func (s *Session) Ping(ctx context.Context) error {
	if s.modernMeta != nil {
		return s.Call(ctx, protocol.MethodDiscover, protocol.DiscoverParams{Meta: s.statelessMeta()}, nil)
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
	err := s.Call(ctx, protocol.MethodSubscriptionsListen, protocol.SubscriptionsListenParams{Meta: s.statelessMeta(), Notifications: subs}, nil)
	return ListenOutcome{Acknowledged: s.acks.Load() > before, Completed: err == nil}, err
}

// ListTools lists every tool, following pagination. A server that did not
// declare the tools capability is still asked (many real servers forget to
// declare it); method-not-found then means no tools.
func (s *Session) ListTools(ctx context.Context) ([]protocol.Tool, error) {
	tools, err := listAll(ctx, s, protocol.MethodToolsList, func(r *protocol.ListToolsResult) ([]protocol.Tool, string, protocol.CacheHint) {
		return r.Tools, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
	if err != nil && s.capabilities.Tools == nil && isMethodNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.keepReadOnly(tools)
	return s.keepParamHeaders(tools), nil
}

// ListResources lists every resource, or nothing when the server has no
// resources capability.
func (s *Session) ListResources(ctx context.Context) ([]protocol.Resource, error) {
	if s.capabilities.Resources == nil {
		return nil, nil
	}
	return listAll(ctx, s, protocol.MethodResourcesList, func(r *protocol.ListResourcesResult) ([]protocol.Resource, string, protocol.CacheHint) {
		return r.Resources, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
}

// ListResourceTemplates lists every resource template, or nothing when the
// server has no resources capability.
func (s *Session) ListResourceTemplates(ctx context.Context) ([]protocol.ResourceTemplate, error) {
	if s.capabilities.Resources == nil {
		return nil, nil
	}
	return listAll(ctx, s, protocol.MethodResourcesTemplatesList, func(r *protocol.ListResourceTemplatesResult) ([]protocol.ResourceTemplate, string, protocol.CacheHint) {
		return r.ResourceTemplates, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
}

// ListPrompts lists every prompt, or nothing when the server has no
// prompts capability.
func (s *Session) ListPrompts(ctx context.Context) ([]protocol.Prompt, error) {
	if s.capabilities.Prompts == nil {
		return nil, nil
	}
	return listAll(ctx, s, protocol.MethodPromptsList, func(r *protocol.ListPromptsResult) ([]protocol.Prompt, string, protocol.CacheHint) {
		return r.Prompts, r.NextCursor, protocol.HintOf(r.TTLMs, r.CacheScope)
	})
}

// listAll follows nextCursor until the last page. A cursor seen twice, or
// more than maxPages pages, is an error rather than a loop. The strictest
// caching hint of the pages is recorded (CacheHints).
func listAll[R any, T any](ctx context.Context, s *Session, method string, page func(*R) ([]T, string, protocol.CacheHint)) ([]T, error) {
	var all []T
	var hint protocol.CacheHint
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
		items, next, h := page(&res)
		all = append(all, items...)
		if n == 0 {
			hint = h
		} else {
			hint = hint.Stricter(h)
		}
		if next == "" {
			s.setHint(method, hint)
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
	meta := s.statelessMetaJSON()
	if meta == nil {
		return protocol.PaginatedParams{Meta: s.requestMeta(nil), Cursor: cursor}
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

func isMethodNotFound(err error) bool {
	var rpcErr *protocol.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeMethodNotFound
}
