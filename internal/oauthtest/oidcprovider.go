package oauthtest

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// StartOIDCProvider runs testdata/oidc/provider.mjs (node-oidc-provider,
// a real authorization server with rotating refresh tokens and reuse
// detection) for resource (or several, space-separated; the first is the
// default), with access tokens of ttl seconds and the
// extra environment env, and returns its issuer; it ends with the test.
// root is the repository's root relative to the test's directory. The
// modules come from $MCPVISOR_OIDC_MODULES (default
// <root>/.deps/npm-oidc/node_modules, which `make deps` installs), node
// from $MCPVISOR_NODE (default the Node 22 of <root>/.deps/conformance-*,
// else node on PATH). Without them the test is skipped, or fails when
// MCPVISOR_REQUIRE_INTEROP is set.
func StartOIDCProvider(t *testing.T, root, resource string, ttl int, env ...string) string {
	t.Helper()
	issuer, _ := RunOIDCProvider(t, root, resource, ttl, env...)
	return issuer
}

// RunOIDCProvider is StartOIDCProvider that also returns a func ending
// the provider before the test ends (so that another may take its port,
// OIDC_PORT, with fresh keys, OIDC_KEYS=1); it may be called more than
// once.
func RunOIDCProvider(t *testing.T, root, resource string, ttl int, env ...string) (issuer string, stop func()) {
	t.Helper()
	modules := os.Getenv("MCPVISOR_OIDC_MODULES")
	if modules == "" {
		modules, _ = filepath.Abs(filepath.Join(root, ".deps", "npm-oidc", "node_modules"))
	}
	node := os.Getenv("MCPVISOR_NODE")
	if node == "" {
		node = "node"
		if found, _ := filepath.Glob(filepath.Join(root, ".deps", "conformance-*", "node_modules", ".bin", "node")); len(found) > 0 {
			node, _ = filepath.Abs(found[len(found)-1])
		}
	}
	if _, err := os.Stat(filepath.Join(modules, "oidc-provider")); err != nil {
		if os.Getenv("MCPVISOR_REQUIRE_INTEROP") != "" {
			t.Fatalf("oidc-provider is not installed in %s (make deps)", modules)
		}
		t.Skipf("oidc-provider is not installed in %s (make deps)", modules)
	}
	script, err := filepath.Abs(filepath.Join(root, "testdata", "oidc", "provider.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), "OIDC_MODULES="+modules, "OIDC_RESOURCE="+resource, "OIDC_SCOPES=mcp:tools",
		"OIDC_TTL="+strconv.Itoa(ttl))
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuilder{}
	cmd.Stderr = stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = testwait.Result(t, "the exit of the authorization server", cmd.Wait)
		})
	}
	t.Cleanup(stop)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if issuer, ok := strings.CutPrefix(sc.Text(), "OIDC_READY "); ok {
				ready <- issuer
			}
		}
	}()
	select {
	case issuer := <-ready:
		return issuer, stop
	case <-time.After(30 * time.Second):
		t.Fatalf("oidc-provider did not start; stderr:\n%s", stderr.String())
		return "", stop
	}
}

// lockedBuilder is a strings.Builder that a process's stderr copier and
// the test may use at once.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var oidcClient = &http.Client{Timeout: testwait.Patience}

// OIDCClientToken gets an access token for resource (with scope) by the
// client credentials grant of one of the test provider's static clients
// (mcpvisor-gateway, cc-user, cc-admin; secret "<id>-secret"). Its sub is
// the client's id.
func OIDCClientToken(t *testing.T, issuer, client, resource, scope string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(url.Values{
		"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope},
	}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, client+"-secret")
	resp, err := oidcClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("client credentials of %s for %s: %d %s %v", client, resource, resp.StatusCode, tok.Error, err)
	}
	return tok.AccessToken
}

// ConfigureOIDCProvider posts q to the test provider's /test/config hook:
// alg and format of the access tokens issued next, account (the user the
// interaction logs in from now on).
func ConfigureOIDCProvider(t *testing.T, issuer string, q url.Values) {
	t.Helper()
	resp, err := oidcClient.Post(issuer+"/test/config?"+q.Encode(), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/test/config answered %d", resp.StatusCode)
	}
}

// JWTClaims decodes the claims of a JWT without verifying it: for tests
// that inspect a token a ResourceServer verified.
func JWTClaims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(b, &claims)
}
