package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// protectedUpstream is the project's mock server over HTTP behind a
// resource server that takes the issuer's JWTs for its own resource.
func protectedUpstream(t *testing.T) *oauthtest.ResourceServer {
	t.Helper()
	mock, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mock.Close() })
	mu, err := url.Parse(mock.URL)
	require.NoError(t, err)
	rs, err := oauthtest.NewResourceServer("http://"+mu.Host, "mcp:tools")
	require.NoError(t, err)
	t.Cleanup(rs.Close)
	return rs
}

// upstreamSubjects returns the subjects of the valid bearer tokens rs
// received from request number from on, and the count so far.
func upstreamSubjects(t *testing.T, rs *oauthtest.ResourceServer, from int) (map[string]bool, int) {
	t.Helper()
	reqs := rs.Requests()
	subs := map[string]bool{}
	for _, r := range reqs[from:] {
		if r.Bearer == "" || !r.Valid {
			continue
		}
		subs[tokenSubject(t, r.Bearer)] = true
	}
	return subs, len(reqs)
}

// tokenSubject is a JWT's sub claim (unverified).
func tokenSubject(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "a JWT")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c struct {
		Sub string `json:"sub"`
	}
	require.NoError(t, json.Unmarshal(b, &c))
	return c.Sub
}

// userAuthAnswer is a tools/call's answer: the echoed text, or the
// error's code, message and URL elicitation.
type userAuthAnswer struct {
	text, body string
	code       int64
	message    string
	urls       []string
}

// userAuthCall calls tool through base's gateway as token's caller.
func userAuthCall(t *testing.T, base, token, tool, text string) userAuthAnswer {
	t.Helper()
	a := identityPost(t, base, token, 7, "tools/call", tool, fmt.Sprintf(`{"name":%q,"arguments":{"text":%q}}`, tool, text))
	require.Equal(t, http.StatusOK, a.status, a.body)
	var msg struct {
		Result *protocol.CallToolResult `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Elicitations []struct{ Mode, URL string } `json:"elicitations"`
			} `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &msg), a.body)
	out := userAuthAnswer{body: a.body}
	if msg.Error != nil {
		out.code, out.message = msg.Error.Code, msg.Error.Message
		for _, e := range msg.Error.Data.Elicitations {
			out.urls = append(out.urls, e.URL)
		}
		return out
	}
	if msg.Result != nil && !msg.Result.IsError && len(msg.Result.Content) > 0 {
		out.text = msg.Result.Content[0].Text
	}
	return out
}

var confirmInput = regexp.MustCompile(`name="(flow|confirm)" value="([^"]*)"`)

// browseAuthorization is the caller's browser: it opens the confirmation
// page at pageURL, checks it names who, presses its button and follows
// the redirects through the authorization server (which logs in the
// account the test set) to the callback. It returns the last page's
// status and text, and the hosts it visited.
func browseAuthorization(t *testing.T, pageURL, who string) (int, string, []string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	var hosts []string
	browser := &http.Client{Jar: jar, Timeout: testwait.Patience, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		hosts = append(hosts, r.URL.Host+r.URL.Path)
		return nil
	}}
	resp, err := browser.Get(pageURL)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	assert.Contains(t, string(page), who, "the page names whom the authorization is for")
	form := url.Values{}
	for _, m := range confirmInput.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	require.NotEmpty(t, form.Get("flow"))
	resp, err = browser.PostForm(pageURL[:strings.Index(pageURL, "?")], form)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), hosts
}

// startUserAuthMember starts a `supervise --cluster` member with its own
// token file and state directory, logging at debug level.
func startUserAuthMember(t *testing.T, bin, cfg, dir string, flags ...string) (*loggedProc, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"supervise", "--config", cfg, "--cluster", "--log-level", "debug"}, flags...)...)
	cmd.Env = cliEnv("GORACE=atexit_sleep_ms=0 halt_on_error=0 exitcode=0",
		envTokenStore+"="+filepath.Join(dir, "tokens.json"), envStateDir+"="+dir)
	p := startLogged(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the log of the member with %v:\n%s", flags, p.logs)
		}
	})
	return p, gatewayURL(t, p.logs)
}

// rawLogs is everything p logged so far.
func rawLogs(p *loggedProc) string {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	return strings.Join(p.logs.raw, "\n")
}

// Per-user upstream credentials through a cluster: two `supervise
// --cluster` members behind one public URL (member A's: the balancer
// sends every request and browser there), both upstream servers pinned
// to member B, protected by the same authorization server
// (node-oidc-provider) as the gateway. The caller talks to member A only.
//   - "ledger" has exchange credentials: A forwards the call with the
//     caller's principal and access token, B exchanges the token (RFC
//     8693), and ledger sees the caller's own subject; a second caller
//     through B itself, its own.
//   - "mail" has per-user credentials: the first call gets a URL
//     elicitation (-32042) from B's pending authorization, typed across
//     the members, to A's confirmation page; the browser confirms on A
//     and comes back to A's callback, which completes the flow B holds;
//     the next call reaches mail with the caller's own upstream account.
func TestSuperviseClusterPerUserCredentials(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	ports := clusterFreePorts(t, 6)
	front := "127.0.0.1:" + strconv.Itoa(ports[0]) // member A's gateway: the public URL
	resource := "http://" + front + "/mcp"
	mail, ledger := protectedUpstream(t), protectedUpstream(t)
	issuer := oauthtest.StartOIDCProvider(t, "../..", resource+" "+mail.Resource()+" "+ledger.Resource(), 120)
	mail.SetIssuer(issuer)
	ledger.SetIssuer(issuer)
	onB := map[string]string{"role": "b"}
	cfg := writeConfig(t, map[string]any{
		"mail": map[string]any{"type": "http", "url": mail.Resource(), "nodes": onB,
			"oauth": map[string]any{"credentials": "per-user"}},
		"ledger": map[string]any{"type": "http", "url": ledger.Resource(), "nodes": onB,
			"oauth": map[string]any{"credentials": "exchange", "clientId": "mcpvisor-gateway", "clientSecret": "mcpvisor-gateway-secret"}},
	})
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[3], ports[4])
	var bases []string
	var procs []*loggedProc
	for i, role := range []string{"a", "b"} {
		listen := front
		if i == 1 {
			listen = "127.0.0.1:" + strconv.Itoa(ports[5])
		}
		memberDir := filepath.Join(dir, role)
		require.NoError(t, os.MkdirAll(memberDir, 0o700))
		p, base := startUserAuthMember(t, bin, cfg, memberDir, "--listen", listen,
			"--cluster-addr", "127.0.0.1:"+strconv.Itoa(ports[1+i]), "--cluster-membership-port", strconv.Itoa(ports[3+i]),
			"--cluster-peers", peers, "--cluster-label", "role="+role,
			"--auth-issuer", issuer, "--auth-resource", resource, "--auth-scopes", "mcp:tools")
		procs, bases = append(procs, p), append(bases, base)
	}
	a := bases[0]
	require.Equal(t, "http://"+front, a)
	alice := ccTokenCLI(t, issuer, "cc-user", resource, "mcp:tools")

	// Exchange: the caller's own subject at ledger, through B.
	before := len(ledger.Requests())
	var last userAuthAnswer
	require.Eventually(t, func() bool {
		last = userAuthCall(t, a, alice, "ledger__echo", "x")
		return last.text == "x"
	}, 30*time.Second, 200*time.Millisecond, "ledger through member A: %+v", &last)
	subs, _ := upstreamSubjects(t, ledger, before)
	assert.Equal(t, map[string]bool{tokenSubject(t, alice): true}, subs, "ledger saw the caller's own subject only")
	// Another caller through member B, which runs ledger itself: its own
	// subject, not alice's.
	bob := ccTokenCLI(t, issuer, "cc-admin", resource, "mcp:tools")
	before = len(ledger.Requests())
	answer := userAuthCall(t, bases[1], bob, "ledger__echo", "y")
	require.Equal(t, "y", answer.text, answer.body)
	subs, _ = upstreamSubjects(t, ledger, before)
	assert.Equal(t, map[string]bool{tokenSubject(t, bob): true}, subs, "ledger saw the second caller's own subject only")

	// Per-user: authorization in a browser, through member A's pages.
	first := userAuthCall(t, a, alice, "mail__echo", "before")
	require.Equal(t, int64(gateway.CodeURLElicitationRequired), first.code, first.body)
	require.Len(t, first.urls, 1, first.body)
	page := first.urls[0]
	require.True(t, strings.HasPrefix(page, "http://"+front+gateway.UserAuthorizePath+"?flow="), page)
	again := userAuthCall(t, a, alice, "mail__echo", "again")
	assert.Equal(t, first.urls, again.urls, "the pending authorization (on B) is offered again")
	resp, err := (&http.Client{Timeout: testwait.Patience}).Post(issuer+"/test/config?account=alice-upstream", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	status, text, visited := browseAuthorization(t, page, "cc-user")
	require.Equal(t, http.StatusOK, status, text)
	assert.Contains(t, text, "Authorized")
	assert.Contains(t, visited, front+gateway.UserCallbackPath, "the browser came back to member A")

	seen := len(mail.Requests())
	answer = userAuthCall(t, a, alice, "mail__echo", "from alice-upstream")
	require.Equal(t, "from alice-upstream", answer.text, answer.body)
	subs, _ = upstreamSubjects(t, mail, seen)
	assert.Equal(t, map[string]bool{"alice-upstream": true}, subs, "mail saw the caller's own upstream account")

	// A redirect no member holds is refused on A's callback (the page
	// checks its own cookie first: a forged state never reaches B).
	resp, err = httpClient.Get("http://" + front + gateway.UserCallbackPath + "?state=forged&code=forged")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Neither member logged the caller's token (it crossed the cluster
	// link with each call) or the flow (the caller's alone).
	flow := strings.TrimPrefix(page, "http://"+front+gateway.UserAuthorizePath+"?flow=")
	for i, p := range procs {
		logs := rawLogs(p)
		assert.NotContains(t, logs, alice, "member %d", i)
		assert.NotContains(t, logs, bob, "member %d", i)
		assert.NotContains(t, logs, flow, "member %d", i)
	}
}
