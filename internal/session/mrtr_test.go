package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// hostAnswers answers input requests the way a host's handlers would,
// and records what it was asked, in order.
type hostAnswers struct {
	mu    sync.Mutex
	asked []string
}

func (h *hostAnswers) handle(_ context.Context, method string, params json.RawMessage) (any, error) {
	h.mu.Lock()
	h.asked = append(h.asked, method)
	h.mu.Unlock()
	switch method {
	case protocol.MethodElicitationCreate:
		var p struct {
			RequestedSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"requestedSchema"`
		}
		_ = json.Unmarshal(params, &p)
		content := map[string]any{}
		for k := range p.RequestedSchema.Properties {
			switch k {
			case "ok":
				content[k] = true
			default:
				content[k] = "Ada-" + k
			}
		}
		return map[string]any{"action": "accept", "content": content}, nil
	case protocol.MethodSamplingCreateMessage:
		return protocol.CreateMessageResult{Role: "assistant", Content: protocol.TextContent("Paris"), Model: "m"}, nil
	case protocol.MethodRootsList:
		return protocol.ListRootsResult{Roots: []protocol.Root{{URI: "file:///work", Name: "work"}}}, nil
	}
	return nil, protocol.NewError(protocol.CodeMethodNotFound, "no %s", method)
}

func (h *hostAnswers) methods() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(slices.Values(h.asked))
}

func firstText(t *testing.T, res *protocol.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, res.Content)
	return res.Content[0].Text
}

// A 2026-07-28 server's InputRequiredResult is resolved through the
// host's handlers and the request retried until it completes: the caller
// sees only the final result, and every retry goes out under a new id
// with the server's requestState unchanged.
func TestInputRequiredIsResolvedThroughTheHandlers(t *testing.T) {
	host := &hostAnswers{}
	f := mustOpen(t, session.Options{Requests: host.handle}, "-conformance")
	require.Equal(t, protocol.Version20260728, f.s.Peer().Version)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	res, err := f.s.CallTool(ctx, "test_input_required_result_elicitation", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada-name!", firstText(t, res))
	assert.NotEqual(t, protocol.ResultInputRequired, res.ResultType)

	res, err = f.s.CallTool(ctx, "test_input_required_result_multiple_inputs", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello Ada-name: Paris (roots: file:///work)", firstText(t, res))

	res, err = f.s.CallTool(ctx, "test_input_required_result_multi_round", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "Ada-name likes Ada-color", firstText(t, res), "two rounds, the second with the state of the first")

	res, err = f.s.CallTool(ctx, "test_input_required_result_request_state", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Contains(t, firstText(t, res), "state-ok")

	prompt, err := f.s.GetPrompt(ctx, "test_input_required_result_prompt", nil)
	require.NoError(t, err)
	require.Len(t, prompt.Messages, 1)
	assert.Equal(t, "Use this context: Ada-context", prompt.Messages[0].Content.Text)

	// The wire: every retry carries a requestState it was given, and
	// its inputResponses; no request id is used twice.
	calls := f.conn.sentParams(protocol.MethodToolsCall)
	var states []string
	for _, p := range calls {
		var c protocol.CallToolParams
		require.NoError(t, json.Unmarshal(p, &c))
		if c.RequestState != "" {
			states = append(states, c.RequestState)
			assert.NotNil(t, c.InputResponses, "a retry with state carries the answers")
		}
	}
	assert.Len(t, states, 4, "multiple_inputs once, multi_round twice, request_state once")
	assert.Equal(t, []string{"elicitation/create", "elicitation/create", "elicitation/create", "elicitation/create",
		"elicitation/create", "elicitation/create", "roots/list", "sampling/createMessage"}, host.methods())
}

// The answers of a round can come from Options.Input, all at once, with
// the call's context (and its values).
func TestInputRequiredRoundsGoToTheInputHandlerWithTheCallsContext(t *testing.T) {
	type key struct{}
	var rounds []protocol.InputRequests
	input := func(ctx context.Context, method string, reqs protocol.InputRequests) (protocol.InputResponses, error) {
		if ctx.Value(key{}) != "call-1" || method != protocol.MethodToolsCall {
			return nil, errors.New("not the call's context")
		}
		rounds = append(rounds, reqs)
		out := protocol.InputResponses{}
		for k := range reqs {
			out[k] = json.RawMessage(`{"action":"accept","content":{"name":"Grace","color":"red"}}`)
		}
		return out, nil
	}
	f := mustOpen(t, session.Options{Input: input}, "-conformance")
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "call-1"), 10*time.Second)
	defer cancel()
	res, err := f.s.CallTool(ctx, "test_input_required_result_multi_round", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "Grace likes red", firstText(t, res))
	require.Len(t, rounds, 2)
	assert.Contains(t, rounds[0], "step1")
	assert.Contains(t, rounds[1], "step2")
}

// What cannot be resolved ends the call with a typed error: no handler,
// a handler that fails (its error kept), a handler that never answers a
// key (the server asks again and again until MaxInputRounds), and a
// request for a capability the call did not declare.
func TestInputRequiredFailuresAreTyped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	f := mustOpen(t, session.Options{}, "-conformance")
	_, err := f.s.CallTool(ctx, "test_input_required_result_sampling", json.RawMessage(`{}`), nil)
	var ie *session.InputError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, session.ErrInputRequired)
	assert.ErrorIs(t, err, session.ErrNoInputHandler)
	assert.Equal(t, "capital_question", ie.Key)
	assert.Equal(t, protocol.MethodSamplingCreateMessage, ie.InputMethod)
	assert.Equal(t, 1, ie.Round)

	refused := protocol.NewError(protocol.CodeInvalidRequest, "the user said no")
	g := mustOpen(t, session.Options{Requests: func(context.Context, string, json.RawMessage) (any, error) { return nil, refused }}, "-conformance")
	_, err = g.s.CallTool(ctx, "test_input_required_result_elicitation", json.RawMessage(`{}`), nil)
	assert.ErrorIs(t, err, session.ErrInputRequired)
	var rpcErr *protocol.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Same(t, refused, rpcErr, "the handler's error is kept")

	silent := func(context.Context, string, protocol.InputRequests) (protocol.InputResponses, error) {
		return protocol.InputResponses{}, nil // answers nothing: the server asks again
	}
	h := mustOpen(t, session.Options{Input: silent}, "-conformance")
	_, err = h.s.CallTool(ctx, "test_input_required_result_elicitation", json.RawMessage(`{}`), nil)
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, session.ErrTooManyInputRounds)
	assert.Equal(t, session.MaxInputRounds+1, ie.Round)
	assert.Len(t, h.conn.sentParams(protocol.MethodToolsCall), session.MaxInputRounds+1, "the first request and one retry per round")

	// Per-request capabilities: the fixture asks only for what the
	// request declares, and refuses with -32021 when nothing is.
	host := &hostAnswers{}
	k := mustOpen(t, session.Options{Requests: host.handle}, "-conformance")
	res, err := k.s.CallToolWith(ctx, "test_input_required_result_capabilities", json.RawMessage(`{}`),
		session.RequestOptions{Capabilities: &protocol.ClientCapabilities{Sampling: &json.RawMessage{'{', '}'}}})
	require.NoError(t, err)
	assert.Equal(t, "Thanks for the input you could give.", firstText(t, res))
	assert.Equal(t, []string{protocol.MethodSamplingCreateMessage}, host.methods(), "only sampling was declared, only sampling was asked")
	_, err = k.s.CallToolWith(ctx, "test_input_required_result_capabilities", json.RawMessage(`{}`),
		session.RequestOptions{Capabilities: &protocol.ClientCapabilities{}})
	require.ErrorAs(t, err, &rpcErr)
	assert.EqualValues(t, protocol.CodeMissingRequiredClientCapability, rpcErr.Code)
	assert.True(t, strings.Contains(string(rpcErr.Data), `"sampling"`), "the error names the capability: %s", rpcErr.Data)
}

// The caching hints of a 2026-07-28 server's discover result and lists
// are kept per connection; a list of several pages keeps the strictest;
// a handshake-era server gives none (immediately stale, private).
func TestCacheHintsOfTheLatestListings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := mustOpen(t, session.Options{}, "-cache-ttl", "30s", "-cache-scope", "private", "-tools", "3", "-page-size", "2", "-prompts", "1")
	_, err := f.s.Lists().Tools(ctx)
	require.NoError(t, err)
	_, err = f.s.Lists().Prompts(ctx)
	require.NoError(t, err)
	h := f.s.Lists().Hints()
	assert.Equal(t, protocol.CacheHint{TTLMs: 30_000}, h.Discover)
	assert.Equal(t, protocol.CacheHint{TTLMs: 30_000}, h.Tools, "four pages, all alike")
	assert.Equal(t, protocol.CacheHint{TTLMs: 30_000}, h.Prompts)
	assert.Equal(t, protocol.CacheHint{}, h.Resources, "not listed yet")

	g := mustOpen(t, session.Options{}, "-cache-ttl", "5s")
	_, err = g.s.Lists().Tools(ctx)
	require.NoError(t, err)
	assert.Equal(t, protocol.CacheHint{TTLMs: 5_000, Public: true}, g.s.Lists().Hints().Tools)

	old := mustOpen(t, session.Options{ProtocolVersion: protocol.LatestHandshakeVersion}, "-cache-ttl", "5s")
	_, err = old.s.Lists().Tools(ctx)
	require.NoError(t, err)
	assert.Equal(t, protocol.CacheHints{}, old.s.Lists().Hints())
}

// Each call declares the capabilities its options give, even as they
// change from one call to the next on one session (the session encodes
// them once while they stay the same); a call without them declares the
// session's own.
func TestCallDeclaresItsOwnCapabilities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f := mustOpen(t, session.Options{Capabilities: protocol.ClientCapabilities{Roots: &protocol.RootsCapability{ListChanged: true}}})
	sampling := json.RawMessage(`{}`)
	tasks := json.RawMessage(`{"list":{}}`)
	a := &protocol.ClientCapabilities{Sampling: &sampling}
	b := &protocol.ClientCapabilities{Sampling: &sampling, Extensions: map[string]json.RawMessage{protocol.ExtensionTasks: tasks}}
	want := []string{`{"sampling":{}}`, `{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{"list":{}}}}`, `{"sampling":{}}`,
		`{"sampling":{}}`, `{"roots":{"listChanged":true}}`}
	for i, caps := range []*protocol.ClientCapabilities{a, b, a, {Sampling: &sampling}, nil} {
		o := session.RequestOptions{Capabilities: caps}
		_, err := f.s.CallToolWith(ctx, "echo", json.RawMessage(`{"text":"x"}`), o)
		require.NoError(t, err, "call %d", i)
		sent := f.conn.sentParams(protocol.MethodToolsCall)
		require.Len(t, sent, i+1)
		var p protocol.CallToolParams
		require.NoError(t, json.Unmarshal(sent[i], &p))
		assert.JSONEq(t, want[i], string(p.Meta[protocol.MetaClientCapabilities]), "call %d: %s", i, sent[i])
		assert.Contains(t, p.Meta, protocol.MetaProtocolVersion, "call %d keeps the era's members", i)
	}
	// The session kept a copy: the caller may change its capabilities
	// after the call.
	sampling[0], sampling[1] = '[', ']'
	_, err := f.s.CallToolWith(ctx, "echo", json.RawMessage(`{"text":"x"}`), session.RequestOptions{Capabilities: a})
	require.NoError(t, err)
	sent := f.conn.sentParams(protocol.MethodToolsCall)
	var p protocol.CallToolParams
	require.NoError(t, json.Unmarshal(sent[len(sent)-1], &p))
	assert.JSONEq(t, `{"sampling":[]}`, string(p.Meta[protocol.MetaClientCapabilities]))
}
