package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The conformance client: what the official MCP conformance suite
// (@modelcontextprotocol/conformance) runs as "the client under test". The
// runner starts it as `<command> <server URL>` with the scenario's name in
// MCP_CONFORMANCE_SCENARIO, and grades what the client did once it exits.
//
// It is the real supervisor with one Streamable HTTP server and a host
// that accepts elicitations with their defaults; each scenario only picks
// which tool to call.

// conformanceDeadline bounds one run: the runner does not kill a hung
// client, so the client must end by itself.
const conformanceDeadline = 20 * time.Second

// conformanceCalls says which tool (and arguments) each scenario expects
// to be called. Scenarios not listed connect, list, and end.
var conformanceCalls = map[string]struct {
	tool string
	args map[string]any
}{
	"tools_call":                          {"add_numbers", map[string]any{"a": 5, "b": 3}},
	"elicitation-sep1034-client-defaults": {"test_client_elicitation_defaults", map[string]any{}},
	"sse-retry":                           {"test_reconnection", map[string]any{}},
	// The step-up scenarios demand more scope for tools/call.
	"auth/scope-step-up":     {"test-tool", map[string]any{}},
	"auth/scope-retry-limit": {"test-tool", map[string]any{}},
}

func (a *app) conformanceCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "conformance SERVER_URL",
		Short:  "Act as the client under test of the MCP conformance suite",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), conformanceDeadline)
			defer cancel()
			if err := a.runConformance(ctx, os.Getenv("MCP_CONFORMANCE_SCENARIO"), args[0]); err != nil {
				a.log.Error().Err(err).Msg("conformance scenario failed")
				return failed(nil)
			}
			return nil
		},
	}
}

const conformanceServer = "conformance"

func (a *app) runConformance(ctx context.Context, scenario, url string) error {
	elicitation := json.RawMessage(`{"form":{}}`)
	oauthCfg, err := conformanceOAuth(scenario, os.Getenv("MCP_CONFORMANCE_CONTEXT"))
	if err != nil {
		return err
	}
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Logger:       a.libLog,
		Capabilities: protocol.ClientCapabilities{Elicitation: &elicitation},
		Requests:     acceptWithDefaults,
		OAuth: mcpvisor.OAuthOptions{
			// The suite's authorization servers grant at once: the flow
			// runs headless, reading the redirect without following it.
			UserAgent: func(string) oauth.UserAgent {
				return &oauth.HeadlessUserAgent{Redirect: conformanceRedirect}
			},
		},
	})
	if err != nil {
		return err
	}
	defer a.closeSupervisor(sup)

	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		conformanceServer: {Config: mcpvisor.TransportConfig{Type: "http", URL: url}, OAuth: oauthCfg},
	})
	if err != nil {
		return err
	}
	if e := res.Errors[conformanceServer]; e != nil {
		return e
	}
	if err := sup.WaitSettled(ctx); err != nil {
		return err
	}
	st := sup.Status()[0]
	if st.State != mcpvisor.StateReady {
		return fmt.Errorf("server %s: %s", st.State, st.LastError)
	}
	a.log.Info().Str("scenario", scenario).Str("version", st.ProtocolVersion).Int("tools", st.Tools).Msg("connected")
	call, ok := conformanceCalls[scenario]
	if !ok {
		return nil
	}
	result, err := sup.CallTool(ctx, mcpvisor.QualifiedName(conformanceServer, call.tool), call.args)
	if err != nil {
		return err
	}
	if result.IsError {
		return fmt.Errorf("tool %s failed: %v", call.tool, result.Content)
	}
	return nil
}

// conformanceRedirect is the redirect URI of the headless code flow
// (nothing listens there: the redirect is read, not followed).
const conformanceRedirect = "http://127.0.0.1:3000/callback"

// conformanceClientMetadata is the client ID metadata document URL the
// suite expects (auth/basic-cimd).
const conformanceClientMetadata = "https://conformance-test.local/client-metadata.json"

// conformanceContext is what the suite passes in MCP_CONFORMANCE_CONTEXT.
type conformanceContext struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
}

// conformanceOAuth builds the server's "oauth" member for scenario from
// the suite's context.
func conformanceOAuth(scenario, rawContext string) (json.RawMessage, error) {
	var c conformanceContext
	if rawContext != "" {
		if err := json.Unmarshal([]byte(rawContext), &c); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	o := mcpvisor.OAuthConfig{ClientMetadataURL: conformanceClientMetadata}
	switch scenario {
	case "auth/client-credentials-jwt", "auth/client-credentials-basic":
		o = mcpvisor.OAuthConfig{Grant: oauth.GrantClientCredentials, ClientID: c.ClientID, ClientSecret: c.ClientSecret,
			PrivateKey: c.PrivateKeyPEM, SigningAlgorithm: c.SigningAlgorithm}
	case "auth/cross-app-access-complete-flow":
		o = mcpvisor.OAuthConfig{Grant: oauth.GrantJWTBearer, ClientID: c.ClientID, ClientSecret: c.ClientSecret,
			Enterprise: &oauth.EnterpriseConfig{IDToken: c.IdPIDToken, IdPTokenEndpoint: c.IdPTokenEndpoint, IdPClientID: c.IdPClientID}}
	default:
		o.ClientID, o.ClientSecret = c.ClientID, c.ClientSecret
	}
	return json.Marshal(o)
}

// acceptWithDefaults is a headless host's answer to elicitation: accept
// forms with the defaults the server proposed, decline anything else.
func acceptWithDefaults(_ context.Context, server, method string, params json.RawMessage) (any, error) {
	if method != protocol.MethodElicitationCreate {
		return nil, protocol.NewError(protocol.CodeMethodNotFound, "%s is not supported", method)
	}
	var p protocol.ElicitParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "%v", err)
	}
	if p.Mode != "" && p.Mode != "form" {
		return protocol.ElicitResult{Action: protocol.ElicitDecline}, nil
	}
	content, err := protocol.ElicitationDefaults(p.RequestedSchema)
	if err != nil {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "%v", err)
	}
	return protocol.ElicitResult{Action: protocol.ElicitAccept, Content: content}, nil
}
