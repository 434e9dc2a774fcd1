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
	case o.Meta == nil && (o.Capabilities == nil || s.meta.modern == nil):
		// The hot path: the params are assembled from bytes, with the
		// stateless-era _meta encoded once per session, not per call.
		first = callToolParams(s.meta.statelessJSON(), name, args)
	case o.Meta == nil:
		// A gateway's call, declaring its client's capabilities: their
		// _meta is encoded once for as long as they stay the same.
		meta, err := s.meta.withCaps(o.Capabilities)
		if err != nil {
			return nil, fmt.Errorf("%s: encoding _meta: %w", protocol.MethodToolsCall, err)
		}
		first = callToolParams(meta, name, args)
	default:
		first = protocol.CallToolParams{Meta: s.meta.options(o), Name: name, Arguments: args}
	}
	ctx, err := s.headers.with(ctx, name, args)
	if err != nil {
		return nil, err
	}
	var res protocol.CallToolResult
	retry := func(m protocol.MRTRParams) any {
		p := protocol.CallToolParams{Meta: s.meta.options(o), Name: name, Arguments: args, RequestState: m.RequestState}
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
		return protocol.ReadResourceParams{Meta: s.meta.options(o), URI: uri, InputResponses: encodeInputs(m.InputResponses), RequestState: m.RequestState}
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
		return protocol.GetPromptParams{Meta: s.meta.options(o), Name: name, Arguments: args, InputResponses: encodeInputs(m.InputResponses), RequestState: m.RequestState}
	}
	if err := typed(ctx, s, protocol.MethodPromptsGet, params(protocol.MRTRParams{}), params, &res, func() string { return res.ResultType }); err != nil {
		return nil, err
	}
	return &res, nil
}

// Ping checks that the server answers. The stateless era has no ping, so
// there it asks server/discover, which every such server must answer.
func (s *Session) Ping(ctx context.Context) error {
	if s.meta.modern != nil {
		return s.Call(ctx, protocol.MethodDiscover, protocol.DiscoverParams{Meta: s.meta.stateless()}, nil)
	}
	return s.Call(ctx, protocol.MethodPing, nil, nil)
}

func isMethodNotFound(err error) bool {
	var rpcErr *protocol.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeMethodNotFound
}
