package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The conformance client: what the official MCP conformance suite
// (@modelcontextprotocol/conformance) runs as "the client under test". The
// runner starts it as `<command> <server URL>` with the scenario's name in
// MCP_CONFORMANCE_SCENARIO, the protocol version the scenario runs at in
// MCP_CONFORMANCE_PROTOCOL_VERSION and, for some scenarios, a JSON context
// in MCP_CONFORMANCE_CONTEXT, and grades what the client did once it
// exits.
//
// It is the real supervisor with one Streamable HTTP server and a headless
// host: elicitations are accepted with their defaults, sampling answers a
// fixed message, roots are the working directory, and authorization runs
// without a browser. What it does is driven by what the suite passes (see
// conformancePlan), so that a renamed or a new scenario needs no code.

// conformanceDeadline bounds one run: the runner does not kill a hung
// client, so the client must end by itself.
const conformanceDeadline = 20 * time.Second

// conformanceCmd is `mcpvisor conformance`. It runs in cobra's goroutine.
type conformanceCmd struct{ *app }

func (a conformanceCmd) command() *cobra.Command {
	return &cobra.Command{
		Use:    "conformance SERVER_URL",
		Short:  "Act as the client under test of the MCP conformance suite",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), conformanceDeadline)
			defer cancel()
			run := conformanceRun{
				scenario: os.Getenv("MCP_CONFORMANCE_SCENARIO"),
				version:  os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"),
				url:      args[0],
			}
			if err := json.Unmarshal([]byte(cmp.Or(os.Getenv("MCP_CONFORMANCE_CONTEXT"), "{}")), &run.context); err != nil {
				return failed(fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err))
			}
			if err := a.runConformance(ctx, run); err != nil {
				a.log.Error().Err(err).Str("scenario", run.scenario).Msg("conformance scenario failed")
				return failed(nil)
			}
			return nil
		},
	}
}

// conformanceRun is what the runner passed.
type conformanceRun struct {
	scenario, version, url string
	context                conformanceContext
}

// conformanceContext is the union of what the suite passes in
// MCP_CONFORMANCE_CONTEXT; a scenario sets what it needs.
type conformanceContext struct {
	// Credentials of a pre-registered client (a secret, or a private key
	// for private_key_jwt).
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	// The enterprise-managed grant: the user's ID token and its IdP.
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
	// Workload identity: the workload's JWT (the other JWTs of the
	// context are for negative variants of clients).
	ValidJWT string `json:"valid_jwt"`
	// ToolCalls are the calls to make, in order, instead of exploring.
	ToolCalls []conformanceCall `json:"toolCalls"`
}

type conformanceCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

const conformanceServer = "conformance"

func (a conformanceCmd) runConformance(ctx context.Context, run conformanceRun) error {
	oauthCfg, err := json.Marshal(conformanceOAuth(run.context))
	if err != nil {
		return err
	}
	root := protocol.Root{URI: "file:///", Name: "root"}
	if wd, err := os.Getwd(); err == nil {
		root = protocol.Root{URI: (&url.URL{Scheme: "file", Path: filepath.ToSlash(wd)}).String(), Name: filepath.Base(wd)}
	}
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Logger:      a.libLog,
		Roots:       []protocol.Root{root},
		Elicitation: acceptWithDefaults,
		Sampling:    sampleFixedAnswer,
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

	server := mcpvisor.ServerConfig{Config: transports.Config{Type: "http", URL: run.url}, OAuth: oauthCfg}
	if protocol.UsesDiscover(run.version) {
		// A stateless-era scenario: speak that version (the handshake
		// eras are negotiated: the suite's servers of those eras answer
		// with older versions too).
		server.ProtocolVersion = run.version
	}
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{conformanceServer: server})
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
	a.log.Info().Str("scenario", run.scenario).Str("version", st.ProtocolVersion).Int("tools", st.ToolCount).Msg("connected")
	d := &conformanceDriver{sup: sup, log: a.log}
	return d.drive(ctx, conformancePlanFor(run))
}

// conformanceRedirect is the redirect URI of the headless code flow
// (nothing listens there: the redirect is read, not followed).
const conformanceRedirect = "http://127.0.0.1:3000/callback"

// conformanceClientMetadata is the client ID metadata document URL the
// suite expects (auth/basic-cimd).
const conformanceClientMetadata = "https://conformance-test.local/client-metadata.json"

// conformanceOAuth builds the server's "oauth" member from what the
// context holds: an ID token means the enterprise-managed grant, a
// workload JWT the workload's jwt-bearer grant, client credentials a
// pre-registered client (whose grant the authorization server's metadata
// decides); the client ID metadata document is offered in every case.
func conformanceOAuth(c conformanceContext) mcpvisor.OAuthConfig {
	o := mcpvisor.OAuthConfig{ClientMetadataURL: conformanceClientMetadata, ClientID: c.ClientID, ClientSecret: c.ClientSecret,
		PrivateKey: c.PrivateKeyPEM, SigningAlgorithm: c.SigningAlgorithm}
	switch {
	case c.IdPIDToken != "":
		o.Grant = oauth.GrantJWTBearer
		o.Enterprise = &oauth.EnterpriseConfig{IDToken: c.IdPIDToken, IdPTokenEndpoint: c.IdPTokenEndpoint, IdPClientID: c.IdPClientID}
	case c.ValidJWT != "":
		o.Grant = oauth.GrantJWTBearer
		o.Workload = &oauth.WorkloadConfig{Token: c.ValidJWT}
	}
	return o
}

// acceptWithDefaults is a headless host's answer to elicitation: accept
// forms (the supervisor fills in the defaults the server proposed),
// decline anything else.
func acceptWithDefaults(_ context.Context, _ string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
	if req.Mode != "" && req.Mode != "form" {
		return &protocol.ElicitResult{Action: protocol.ElicitDecline}, nil
	}
	return &protocol.ElicitResult{Action: protocol.ElicitAccept}, nil
}

// sampleFixedAnswer is a headless host's model: one fixed text.
func sampleFixedAnswer(_ context.Context, _ string, _ *protocol.CreateMessageParams) (*protocol.CreateMessageResult, error) {
	var res protocol.CreateMessageResult
	err := json.Unmarshal([]byte(`{"role":"assistant","content":{"type":"text","text":"This is a sampled answer from mcpvisor's conformance client."},`+
		`"model":"mcpvisor-conformance","stopReason":"endTurn"}`), &res)
	return &res, err
}
