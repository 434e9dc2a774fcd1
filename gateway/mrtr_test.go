package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// answeringHost is an mcpvisor host of the gateway, in the given era,
// whose handlers answer elicitation, sampling and roots, and record what
// they were asked.
type answeringHost struct {
	sup   *mcpvisor.Supervisor
	mu    sync.Mutex
	asked []string
}

func newAnsweringHost(t *testing.T, url, version string) *answeringHost {
	t.Helper()
	h := &answeringHost{}
	note := func(what string) {
		h.mu.Lock()
		h.asked = append(h.asked, what)
		h.mu.Unlock()
	}
	opts := mcpvisor.Options{
		Logger: zerolog.Nop(),
		Roots:  []protocol.Root{{URI: "file:///work", Name: "work"}},
		Sampling: func(_ context.Context, _ string, _ *protocol.CreateMessageParams) (*protocol.CreateMessageResult, error) {
			note("sampling")
			return &protocol.CreateMessageResult{Role: "assistant", Content: protocol.TextContent("Paris"), Model: "m"}, nil
		},
		Elicitation: func(_ context.Context, _ string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
			note("elicitation")
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			_ = json.Unmarshal(req.RequestedSchema, &schema)
			content := map[string]json.RawMessage{}
			for k := range schema.Properties {
				switch k {
				case "ok", "confirm":
					content[k] = json.RawMessage(`true`)
				default:
					content[k] = json.RawMessage(`"Ada-` + k + `"`)
				}
			}
			return &protocol.ElicitResult{Action: protocol.ElicitAccept, Content: content}, nil
		},
	}
	sup, err := mcpvisor.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), map[string]mcpvisor.ServerConfig{
		"gw": {Config: httpConfig(url), ProtocolVersion: version},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	st := sup.Status()[0]
	require.Equal(t, mcpvisor.StateReady, st.State, st.LastError)
	if version != "" {
		require.Equal(t, version, st.ProtocolVersion)
	} else {
		require.Equal(t, protocol.Version20260728, st.ProtocolVersion)
	}
	h.sup = sup
	return h
}

func (h *answeringHost) questions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(slices.Values(h.asked))
}

func callText(t *testing.T, h *answeringHost, tool string, args any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.sup.CallTool(ctx, tool, args)
	require.NoError(t, err, tool)
	require.NotEmpty(t, res.Content, tool)
	require.False(t, res.IsError, res.Content[0].Text)
	return res.Content[0].Text
}

// A 2026-07-28 server behind the gateway that answers input_required
// works for a client of either era: a handshake-era host is sent the
// requests (on its call's stream), a stateless-era host gets
// input_required from the gateway and retries; in both the call
// completes with the answers, over several rounds and several inputs at
// once, for tools and prompts.
func TestInputRequiredFromAStatelessServerReachesEveryEra(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{})
	for _, version := range []string{protocol.Version20251125, ""} {
		name := version
		if name == "" {
			name = protocol.Version20260728
		}
		t.Run(name, func(t *testing.T) {
			h := newAnsweringHost(t, url, version)
			assert.Equal(t, "Hello Ada-name: Paris (roots: file:///work)",
				callText(t, h, "mcp__gw__fx__test_input_required_result_multiple_inputs", map[string]any{}))
			assert.Equal(t, "Ada-name likes Ada-color", callText(t, h, "mcp__gw__fx__test_input_required_result_multi_round", map[string]any{}))
			assert.Contains(t, callText(t, h, "mcp__gw__fx__test_input_required_result_request_state", map[string]any{}), "state-ok")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pr, err := h.sup.GetPrompt(ctx, "mcp__gw__fx__test_input_required_result_prompt", nil)
			require.NoError(t, err)
			require.Len(t, pr.Messages, 1)
			assert.Equal(t, "Use this context: Ada-context", pr.Messages[0].Content.Text)
			// (roots are answered by the host's Options.Roots, unasked)
			assert.Equal(t, []string{"elicitation", "elicitation", "elicitation", "elicitation", "elicitation", "sampling"}, h.questions())
		})
	}
}

// A handshake-era server's requests to its client (elicitation,
// sampling) reach a stateless-era client as input_required, and its
// retry brings the answers back to the server.
func TestServerRequestsReachAStatelessClientAsInputRequired(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures("-versions", protocol.Version20251125)}, gateway.Options{})
	h := newAnsweringHost(t, url, "")
	assert.Equal(t, `Elicitation completed: action=accept, content={"email":"Ada-email","username":"Ada-username"}`,
		callText(t, h, "mcp__gw__fx__test_elicitation", map[string]string{"message": "who?"}))
	assert.Equal(t, "LLM response: Paris", callText(t, h, "mcp__gw__fx__test_sampling", map[string]string{"prompt": "capital?"}))
	assert.Equal(t, []string{"elicitation", "sampling"}, h.questions())
}

// The requestState the gateway gives is good for one retry of that
// request: a tampered, reused or foreign one is -32602, and so is one
// that expired (the call behind it then cancelled). Answers given in
// advance are used; malformed ones are -32602.
func TestInputRequiredRequestStateIsTheGatewaysOwn(t *testing.T) {
	g, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare, InputWait: time.Hour})
	c := newStatelessClient(t, url, `{"elicitation":{},"sampling":{}}`)
	const tool = `"name":"test_input_required_result_elicitation","arguments":{}`
	first := c.call(protocol.MethodToolsCall, `{`+tool+`}`).result(t)
	assert.Equal(t, `"input_required"`, string(first["resultType"]))
	assert.JSONEq(t, `{"user_name":{"method":"elicitation/create","params":{"mode":"form","message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}}`,
		string(first["inputRequests"]))
	assert.NotContains(t, first, "ttlMs", "an interim result is not cacheable")
	var state string
	require.NoError(t, json.Unmarshal(first["requestState"], &state))
	assert.Equal(t, 1, g.InputsWaiting())
	resp, err := client.Get(url + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(metrics), "\nmcpvisor_gateway_input_rounds_waiting 1\n")
	assert.Contains(t, string(metrics), "\nmcpvisor_gateway_input_calls 1\n")

	answer := `"inputResponses":{"user_name":{"action":"accept","content":{"name":"Grace"}}}`
	for name, st := range map[string]string{"tampered": state + "x", "unknown": "mcpvisor-0"} {
		a := c.call(protocol.MethodToolsCall, `{`+tool+`,`+answer+`,"requestState":"`+st+`"}`)
		assert.Equal(t, int64(protocol.CodeInvalidParams), a.code(t), name)
	}
	other := c.call(protocol.MethodToolsCall, `{"name":"test_input_required_result_sampling","arguments":{},`+answer+`,"requestState":"`+state+`"}`)
	assert.Equal(t, int64(protocol.CodeInvalidParams), other.code(t), "another tool's retry")

	done := c.call(protocol.MethodToolsCall, `{`+tool+`,`+answer+`,"requestState":"`+state+`"}`).result(t)
	assert.Contains(t, string(done["content"]), "Hello, Grace!")
	again := c.call(protocol.MethodToolsCall, `{`+tool+`,`+answer+`,"requestState":"`+state+`"}`)
	assert.Equal(t, int64(protocol.CodeInvalidParams), again.code(t), "a state is good for one retry")
	assert.Equal(t, 0, g.InputsWaiting())

	// Answers given in advance: no round trip at all; extra keys ignored.
	pre := c.call(protocol.MethodToolsCall, `{`+tool+`,"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ida"}},"extra":{"action":"decline"}}}`).result(t)
	assert.Contains(t, string(pre["content"]), "Hello, Ida!")
	for _, bad := range []string{`null`, `{"user_name":12345}`, `[]`} {
		a := c.call(protocol.MethodToolsCall, `{`+tool+`,"inputResponses":`+bad+`}`)
		assert.Equal(t, int64(protocol.CodeInvalidParams), a.code(t), bad)
	}
}

// A round nobody answers: after InputWait its state is forgotten and the
// call behind it cancelled.
func TestInputRequiredRoundExpires(t *testing.T) {
	g, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare, InputWait: 50 * time.Millisecond})
	c := newStatelessClient(t, url, `{"elicitation":{}}`)
	const tool = `"name":"test_input_required_result_elicitation","arguments":{}`
	first := c.call(protocol.MethodToolsCall, `{`+tool+`}`).result(t)
	var state string
	require.NoError(t, json.Unmarshal(first["requestState"], &state))
	require.Eventually(t, func() bool { return g.InputsWaiting() == 0 && g.InputCalls() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the round expires and the call behind it ends")
	a := c.call(protocol.MethodToolsCall, `{`+tool+`,"inputResponses":{"user_name":{"action":"accept","content":{"name":"Late"}}},"requestState":"`+state+`"}`)
	assert.Equal(t, int64(protocol.CodeInvalidParams), a.code(t))
	assert.True(t, strings.Contains(a.msg.Error.Message, "expired"), a.msg.Error.Message)
}

// A stateless-era client that declared none of sampling, elicitation and
// roots is never asked for input: its call runs on its own request (no
// input round, no requestState, no call left behind the gateway), and
// what a server asks during it goes, as for a handshake-era client's
// call, to a client that declared the capability, or fails with
// -32601 when none did.
func TestAClientThatDeclaredNoInputIsNotAskedForIt(t *testing.T) {
	g, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare, InputWait: time.Hour})
	c := newStatelessClient(t, url, `{}`)
	const tool = `{"name":"test_input_required_result_elicitation","arguments":{}}`

	alone := c.call(protocol.MethodToolsCall, tool)
	assert.Equal(t, int64(protocol.CodeMethodNotFound), alone.code(t), "no client declared elicitation: %s", alone.raw)
	assert.Contains(t, alone.msg.Error.Message, "declared the capability for elicitation/create")
	assert.Equal(t, 0, g.InputsWaiting(), "no round was presented")
	assert.Zero(t, g.InputCalls(), "no call is left behind the gateway")

	h := newAnsweringHost(t, url, protocol.Version20251125)
	answered := c.call(protocol.MethodToolsCall, tool).result(t)
	assert.NotContains(t, answered, "requestState")
	assert.Contains(t, string(answered["content"]), "Ada-name", "the host that declared elicitation answered")
	assert.Equal(t, []string{"elicitation"}, h.questions())
	assert.Equal(t, 0, g.InputsWaiting())
	assert.Zero(t, g.InputCalls())
}
