package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testpki"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// The official TypeScript SDK client, with its OAuth client provider,
// completes the authorization flow against `supervise --auth-issuer`
// (nothing configured but the issuer) and a real authorization server
// (node-oidc-provider): 401 → protected resource metadata → authorization
// server metadata → dynamic registration → authorization code with PKCE
// and the gateway as resource → token → tools listed and called.
func TestTypeScriptSDKOAuthAgainstGateway(t *testing.T) {
	modules := tsSDK(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	listen := freePort(t)
	resource := "http://" + listen + "/mcp"
	issuer := oauthtest.StartOIDCProvider(t, "../..", resource, 60, "OIDC_SCOPES=mcp:tools mcpvisor:admin", "OIDC_REGISTER_SCOPES=1")
	cfg := writeConfig(t, map[string]any{"a": mock(bin, "-name", "a")})
	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", listen, "--auth-issuer", issuer)
	p := startLogged(t, cmd)
	require.Equal(t, "http://"+listen, gatewayURL(t, p.logs))

	script, err := os.ReadFile("../../testdata/tsclient/oauth.mjs")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "oauth.mjs"), script, 0o644))
	node := exec.CommandContext(testwait.Context(t), "node", filepath.Join(dir, "oauth.mjs"), resource)
	node.Dir = dir
	node.Env = cliEnv()
	node.WaitDelay = time.Second
	out, err := node.CombinedOutput()
	t.Logf("node oauth.mjs:\n%s", out)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "FAIL")
	assert.Contains(t, string(out), "ok: tools/call a__echo")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, p.wait(t), "supervise exits cleanly on SIGINT; log:\n%s", p.logs)
}

// In cluster mode every member validates tokens the same way: two
// members given the same --auth-issuer and --auth-resource (the URL of
// the load balancer in front of them) each publish the same metadata,
// answer 401 without a token, admit the issuer's token for the resource,
// and want the admin scope for /status.
func TestSuperviseClusterAuthIssuer(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 5)
	resource := "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/mcp" // the balancer's URL
	issuer := oauthtest.StartOIDCProvider(t, "../..", resource, 60, "OIDC_SCOPES=mcp:tools mcpvisor:admin")
	cfg := writeConfig(t, map[string]any{"a": mock(bin, "-name", "a")})
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[3], ports[4])
	pki := testpki.NewCA(t, "mcpvisor test cluster CA").WriteMember(t, dir, "member")
	var bases []string
	for i := range 2 {
		_, base, _ := startClusterMember(t, bin, cfg, "--cluster-addr", "127.0.0.1:"+strconv.Itoa(ports[1+i]),
			"--cluster-tls-cert", pki.Cert, "--cluster-tls-key", pki.Key, "--cluster-tls-ca", pki.CA,
			"--cluster-membership-port", strconv.Itoa(ports[3+i]), "--cluster-peers", peers, "--cluster-refresh", "1h",
			"--auth-issuer", issuer, "--auth-resource", resource, "--auth-scopes", "mcp:tools")
		bases = append(bases, base)
	}
	user := ccTokenCLI(t, issuer, "cc-user", resource, "mcp:tools")
	admin := ccTokenCLI(t, issuer, "cc-admin", resource, "mcp:tools mcpvisor:admin")
	for _, base := range bases {
		resp, err := httpClient.Get(base + "/.well-known/oauth-protected-resource/mcp")
		require.NoError(t, err)
		var md struct {
			Resource string   `json:"resource"`
			Servers  []string `json:"authorization_servers"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&md))
		resp.Body.Close()
		assert.Equal(t, resource, md.Resource)
		assert.Equal(t, []string{issuer}, md.Servers)

		status := func(token string) (int, string) {
			req, err := http.NewRequest(http.MethodGet, base+"/status", nil)
			require.NoError(t, err)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := httpClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
		}
		code, challenge := status("")
		assert.Equal(t, http.StatusUnauthorized, code)
		assert.Contains(t, challenge, `resource_metadata="http://127.0.0.1:`+strconv.Itoa(ports[0])+`/.well-known/oauth-protected-resource/mcp"`)
		code, challenge = status(user)
		assert.Equal(t, http.StatusForbidden, code)
		assert.Contains(t, challenge, `error="insufficient_scope", scope="mcp:tools mcpvisor:admin"`)
		code, _ = status(admin)
		assert.Equal(t, http.StatusOK, code, base)
	}
}

// ccTokenCLI gets an access token for resource by the test provider's
// client credentials grant.
func ccTokenCLI(t *testing.T, issuer, client, resource, scope string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(url.Values{
		"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, client+"-secret")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return tok.AccessToken
}

// The --auth-* flags are checked before anything starts: each is a usage
// error without --auth-issuer, a non-loopback listener needs
// --auth-resource, the client id and secret go together, and an issuer
// that is no http(s) URL is refused; a non-loopback listener may have an
// issuer instead of a token.
func TestSuperviseAuthFlagsChecked(t *testing.T) {
	cfg := writeConfig(t, map[string]any{})
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret\n"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--auth-scopes", "x"}, "need --auth-issuer"},
		{[]string{"--auth-issuer", "https://as.example", "--listen", "0.0.0.0:0"}, "needs --auth-resource"},
		{[]string{"--listen", "0.0.0.0:0"}, "requires --token-file or --auth-issuer"},
		{[]string{"--auth-issuer", "https://as.example", "--auth-client-id", "gw"}, "go together"},
		{[]string{"--auth-issuer", "https://as.example", "--auth-introspection-url", "https://as.example/i"}, "needs --auth-client-id"},
		{[]string{"--auth-issuer", "ftp://as.example"}, "--auth-issuer"},
		{[]string{"--auth-issuer", "https://as.example", "--auth-resource", "mcp"}, "--auth-resource"},
		{[]string{"--auth-issuer", "https://as.example", "--auth-client-id", "gw", "--auth-client-secret-file", secret + ".missing"}, "--auth-client-secret-file"},
	} {
		r := cli(t, append([]string{"supervise", "--config", cfg}, c.args...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.NotContains(t, r.stderr, "s3cret")
	}
}
