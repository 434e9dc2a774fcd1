package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/httppeer"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func TestExampleArguments(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`: `{"a":1,"b":1}`,
		`{"type":"object","properties":{"s":{"type":"string","default":"d"},"e":{"enum":["x","y"]},"c":{"const":3},
		  "o":{"type":"object","properties":{"f":{"type":["boolean","null"]}},"required":["f"]},"opt":{"type":"string"}},
		  "required":["s","e","c","o"]}`: `{"s":"d","e":"x","c":3,"o":{"f":true}}`,
		`{"type":"object"}`: `{}`,
		`{"type":"string"}`: `{}`,
		`not json`:          `{}`,
	} {
		assert.JSONEq(t, want, string(exampleArguments(json.RawMessage(schema))), schema)
	}
}

// The OAuth settings come from what the context holds, not from the
// scenario's name.
func TestConformanceOAuthFromContext(t *testing.T) {
	o := conformanceOAuth(conformanceContext{})
	assert.Equal(t, conformanceClientMetadata, o.ClientMetadataURL)
	assert.Empty(t, o.Grant, "the code flow")

	o = conformanceOAuth(conformanceContext{ClientID: "c", ClientSecret: "s"})
	assert.Equal(t, "c", o.ClientID)
	assert.Empty(t, o.Grant, "pre-registered: the authorization server's metadata decides the grant")

	o = conformanceOAuth(conformanceContext{ClientID: "c", IdPIDToken: "id", IdPTokenEndpoint: "https://idp/token", IdPClientID: "idp"})
	assert.Equal(t, oauth.GrantJWTBearer, o.Grant)
	require.NotNil(t, o.Enterprise)
	assert.Equal(t, "id", o.Enterprise.IDToken)

	o = conformanceOAuth(conformanceContext{ClientID: "w", ValidJWT: "jwt"})
	assert.Equal(t, oauth.GrantJWTBearer, o.Grant)
	require.NotNil(t, o.Workload)
	assert.Equal(t, "jwt", o.Workload.Token)
}

func TestConformancePlan(t *testing.T) {
	calls := []conformanceCall{{Name: "t", Arguments: json.RawMessage(`{}`)}}
	p := conformancePlanFor(conformanceRun{scenario: "anything-new", context: conformanceContext{ToolCalls: calls}})
	assert.Equal(t, calls, p.calls)
	p = conformancePlanFor(conformanceRun{scenario: "anything-new"})
	assert.Nil(t, p.calls)
	assert.False(t, p.loadSkills)
	assert.Nil(t, p.echoSchema)
}

// runConformanceClient runs the binary as the suite does, against peer.
func runConformanceClient(t *testing.T, peer *httppeer.Peer, scenario, rawContext string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "conformance", peer.URL())
	cmd.Env = cliEnv("MCP_CONFORMANCE_SCENARIO="+scenario, "MCP_CONFORMANCE_PROTOCOL_VERSION="+protocol.Version20260728,
		"MCP_CONFORMANCE_CONTEXT="+rawContext)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), stderr.String()
	}
	require.NoError(t, err, stderr.String())
	return 0, stderr.String()
}

func callsOf(peer *httppeer.Peer) []string {
	var out []string
	for _, p := range peer.Received() {
		if p.Msg.Method == protocol.MethodToolsCall {
			var params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			_ = json.Unmarshal(p.Msg.Params, &params)
			out = append(out, params.Name+" "+string(params.Arguments))
		}
	}
	return out
}

// Without instructions the client explores: it calls every tool with
// arguments built from its schema, reads the resources, gets the prompts;
// a tool that fails is the server's answer, not the client's failure.
func TestConformanceClientExplores(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{Resources: 1, Prompts: 1})
	code, stderr := runConformanceClient(t, peer, "some-new-scenario", "")
	require.Equal(t, 0, code, stderr)
	assert.ElementsMatch(t, []string{
		`add {"a":1,"b":1}`, `announce {"text":"example"}`, `echo {"text":"example"}`, `fail {}`, `sleep {"ms":1}`,
	}, callsOf(peer))
	methods := peer.Methods()
	assert.Contains(t, methods, protocol.MethodResourcesRead)
	assert.Contains(t, methods, protocol.MethodPromptsGet)
	assert.NotContains(t, methods, protocol.MethodInitialize, "a 2026-07-28 scenario speaks that version")
}

// The context's toolCalls are the calls made, with their arguments as
// given; one that fails fails the run.
func TestConformanceClientMakesTheCallsItIsGiven(t *testing.T) {
	peer := httppeer.New(t, mockserver.Options{})
	code, stderr := runConformanceClient(t, peer, "x", `{"toolCalls":[{"name":"echo","arguments":{"text":"hi"}},{"name":"add","arguments":{"a":2,"b":3}}]}`)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{`echo {"text":"hi"}`, `add {"a":2,"b":3}`}, callsOf(peer))

	peer = httppeer.New(t, mockserver.Options{})
	code, _ = runConformanceClient(t, peer, "x", `{"toolCalls":[{"name":"no_such_tool","arguments":{}}]}`)
	assert.Equal(t, exitFailure, code)
}
