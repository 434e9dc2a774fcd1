package gateway_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// statelessClient speaks the stateless era (2026-07-28) to the gateway
// by hand, one self-contained POST per request.
type statelessClient struct {
	t    *testing.T
	url  string
	caps string // the clientCapabilities of every request's _meta
	id   atomic.Int64
}

func newStatelessClient(t *testing.T, url, caps string) *statelessClient {
	return &statelessClient{t: t, url: url, caps: caps}
}

// answer is one response of the gateway.
type answer struct {
	status int
	msg    protocol.Message
	raw    string // the response message's encoding
}

func (a answer) result(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	require.Nil(t, a.msg.Error, "want a result, got %s", a.raw)
	var out map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(a.msg.Result, &out), a.raw)
	return out
}

func (a answer) code(t *testing.T) int64 {
	t.Helper()
	require.NotNil(t, a.msg.Error, "want an error, got %s", a.raw)
	return a.msg.Error.Code
}

// params returns params (a JSON object) with a conformant _meta.
func (c *statelessClient) params(params string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":` + c.caps + `}`
	if strings.TrimSpace(params) == "{}" || params == "" {
		return "{" + meta + "}"
	}
	return "{" + meta + "," + strings.TrimPrefix(strings.TrimSpace(params), "{")
}

// call sends method with params (its _meta added) and the standard
// headers (Mcp-Name from the params' name, uri or taskId).
func (c *statelessClient) call(method, params string) answer {
	return c.raw(method, c.params(params), nil)
}

// raw sends method with params as they are and the standard headers,
// changed by hdr (an empty value removes a header).
func (c *statelessClient) raw(method, params string, hdr map[string]string) answer {
	c.t.Helper()
	id := c.id.Add(1)
	body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"` + method + `","params":` + params + `}`
	req, err := http.NewRequest(http.MethodPost, c.url+gateway.MCPPath, strings.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocol.Version20260728)
	req.Header.Set("Mcp-Method", method)
	var p struct {
		Name   *string `json:"name"`
		URI    *string `json:"uri"`
		TaskID *string `json:"taskId"`
	}
	_ = json.Unmarshal([]byte(params), &p)
	for _, v := range []*string{p.Name, p.URI, p.TaskID} {
		if v != nil {
			req.Header.Set("Mcp-Name", *v)
		}
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header[k] = []string{v}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx)) // testwait:ok the context ends within 30 s
	require.NoError(c.t, err, "POST %s", method)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			m, err := protocol.Decode([]byte(data))
			if err == nil && m.Kind == protocol.KindResponse {
				a.msg, a.raw = *m, data
				break
			}
		}
	} else {
		b, err := io.ReadAll(resp.Body)
		require.NoError(c.t, err)
		a.raw = string(b)
		if len(b) > 0 {
			m, err := protocol.Decode(b)
			require.NoError(c.t, err, "a JSON-RPC message: %s", b)
			a.msg = *m
		}
	}
	require.Equal(c.t, protocol.KindResponse, a.msg.Kind, "%s: a response, HTTP %d", method, resp.StatusCode)
	require.Equal(c.t, strconv.FormatInt(id, 10), a.msg.ID.String(), "the response echoes the request's id: %s", a.raw)
	return a
}

// statelessGateway runs a gateway (with its forwarder, as `supervise`
// does) over the given servers, and returns its URL.
func statelessGateway(t *testing.T, servers map[string]mcpvisor.ServerConfig, opts gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	var fwd gateway.Forwarder
	o := mcpvisor.Options{Logger: zerolog.Nop()}
	fwd.Configure(&o)
	sup, err := mcpvisor.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, sup.Close(ctx))
	})
	_, err = sup.SetServers(context.Background(), servers, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	for _, st := range sup.Status() {
		require.Equal(t, mcpvisor.StateReady, st.State, "%s: %s", st.Name, st.LastError)
	}
	g, srv := serve(t, sup, opts)
	fwd.Attach(g)
	return g, srv.URL
}

func fixtures(args ...string) mcpvisor.ServerConfig {
	return mcpvisor.ServerConfig{Config: mockserver.Command(append([]string{"-name", "fx", "-conformance"}, args...)...)}
}

// A stateless-era request is validated whole before it is served: its
// _meta, then its headers against its body; the removed and unknown
// methods are 404. Every error echoes the request's id. A handshake-era
// session is not affected.
func TestStatelessRequestsAreValidated(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare})
	c := newStatelessClient(t, url, `{}`)

	ok := c.call(protocol.MethodDiscover, `{}`)
	assert.Equal(t, http.StatusOK, ok.status)
	assert.Contains(t, string(ok.result(t)["capabilities"]), `"extensions":{"io.modelcontextprotocol/skills"`)

	for name, tc := range map[string]struct {
		method, params string
		hdr            map[string]string
		status         int
		code           int64
	}{
		"no _meta":                    {"server/discover", `{}`, nil, 400, protocol.CodeInvalidParams},
		"no protocolVersion":          {"server/discover", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, nil, 400, protocol.CodeInvalidParams},
		"no clientCapabilities":       {"server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, nil, 400, protocol.CodeInvalidParams},
		"unknown version":             {"server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9","io.modelcontextprotocol/clientCapabilities":{}}}`, map[string]string{"Mcp-Protocol-Version": "v9"}, 400, protocol.CodeUnsupportedProtocolVersion},
		"version header vs _meta":     {"server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9","io.modelcontextprotocol/clientCapabilities":{}}}`, nil, 400, protocol.CodeHeaderMismatch},
		"no version header":           {"tools/list", c.params(`{}`), map[string]string{"Mcp-Protocol-Version": ""}, 400, protocol.CodeHeaderMismatch},
		"no Mcp-Method":               {"tools/list", c.params(`{}`), map[string]string{"Mcp-Method": ""}, 400, protocol.CodeHeaderMismatch},
		"Mcp-Method of another":       {"tools/list", c.params(`{}`), map[string]string{"Mcp-Method": "prompts/list"}, 400, protocol.CodeHeaderMismatch},
		"Mcp-Method in capitals":      {"tools/list", c.params(`{}`), map[string]string{"Mcp-Method": "TOOLS/LIST"}, 400, protocol.CodeHeaderMismatch},
		"no Mcp-Name":                 {"tools/call", c.params(`{"name":"echo","arguments":{"text":"x"}}`), map[string]string{"Mcp-Name": ""}, 400, protocol.CodeHeaderMismatch},
		"Mcp-Name of another":         {"tools/call", c.params(`{"name":"echo","arguments":{"text":"x"}}`), map[string]string{"Mcp-Name": "add"}, 400, protocol.CodeHeaderMismatch},
		"Mcp-Name of another URI":     {"resources/read", c.params(`{"uri":"test://static-text"}`), map[string]string{"Mcp-Name": "test://static-binary"}, 400, protocol.CodeHeaderMismatch},
		"Mcp-Name, bad Base64":        {"tools/call", c.params(`{"name":"echo","arguments":{"text":"x"}}`), map[string]string{"Mcp-Name": "=?base64?ZWNobw?="}, 400, protocol.CodeHeaderMismatch},
		"initialize":                  {"initialize", c.params(`{}`), nil, 404, protocol.CodeMethodNotFound},
		"ping":                        {"ping", c.params(`{}`), nil, 404, protocol.CodeMethodNotFound},
		"logging/setLevel":            {"logging/setLevel", c.params(`{"level":"info"}`), nil, 404, protocol.CodeMethodNotFound},
		"resources/subscribe":         {"resources/subscribe", c.params(`{"uri":"test://static-text"}`), nil, 404, protocol.CodeMethodNotFound},
		"resources/unsubscribe":       {"resources/unsubscribe", c.params(`{"uri":"test://static-text"}`), nil, 404, protocol.CodeMethodNotFound},
		"tasks/result (extension v1)": {"tasks/result", c.params(`{"taskId":"fx/x"}`), nil, 404, protocol.CodeMethodNotFound},
		"unknown method":              {"unknown/method", c.params(`{}`), nil, 404, protocol.CodeMethodNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			a := c.raw(tc.method, tc.params, tc.hdr)
			assert.Equal(t, tc.status, a.status, a.raw)
			assert.Equal(t, tc.code, a.code(t), a.raw)
			if tc.code == protocol.CodeUnsupportedProtocolVersion {
				assert.JSONEq(t, `{"supported":["2026-07-28"],"requested":"v9"}`, string(a.msg.Error.Data))
			}
		})
	}

	// Accepted: header names in any case, values with whitespace around
	// them, Base64-encoded names, a _meta without clientInfo.
	for name, tc := range map[string]struct {
		method, params string
		hdr            map[string]string
	}{
		"lowercase header name":  {"tools/list", c.params(`{}`), map[string]string{"Mcp-Method": "", "mcp-method": "tools/list"}},
		"whitespace around name": {"tools/call", c.params(`{"name":"echo","arguments":{"text":"x"}}`), map[string]string{"Mcp-Name": "  echo \t"}},
		"Base64 name":            {"tools/call", c.params(`{"name":"echo","arguments":{"text":"x"}}`), map[string]string{"Mcp-Name": "=?base64?" + base64.StdEncoding.EncodeToString([]byte("echo")) + "?="}},
		"no clientInfo":          {"server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			a := c.raw(tc.method, tc.params, tc.hdr)
			assert.Equal(t, http.StatusOK, a.status, a.raw)
			a.result(t)
		})
	}

	// A handshake-era session keeps ping and logging/setLevel, and needs
	// none of the headers.
	rc := &rawClient{t: t, url: url}
	rc.initialize()
	resp, body := rc.post(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":{}}`, body)
	resp, body = rc.post(`{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"debug"}}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":8,"result":{}}`, body)
}

// Tool arguments marked x-mcp-header are mirrored in Mcp-Param-*
// headers: the gateway checks them against the body, decoding Base64.
func TestMcpParamHeadersMustMatchTheArguments(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare})
	c := newStatelessClient(t, url, `{}`)
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	for name, tc := range map[string]struct {
		region string
		header string // "" sends none
		ok     bool
	}{
		"plain":                  {"us-west1", "us-west1", true},
		"Base64":                 {"Hello, 世界", b64("Hello, 世界"), true},
		"no prefix is literal":   {"SGVsbG8=", "SGVsbG8=", true},
		"no suffix is literal":   {"=?base64?SGVsbG8=", "=?base64?SGVsbG8=", true},
		"missing":                {"us-west1", "", false},
		"another value":          {"us-west1", "eu-west3", false},
		"Base64 without padding": {"Hello", "=?base64?SGVsbG8?=", false},
		"Base64 with bad chars":  {"Hello", "=?base64?SGVs!!!bG8=?=", false},
		"not ASCII, not Base64":  {"grüß", "grüß", false},
	} {
		t.Run(name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"region": tc.region, "query": "q"})
			hdr := map[string]string{}
			if tc.header != "" {
				hdr["Mcp-Param-Region"] = tc.header
			}
			a := c.raw("tools/call", c.params(`{"name":"test_custom_headers","arguments":`+string(args)+`}`), hdr)
			if tc.ok {
				assert.Equal(t, http.StatusOK, a.status, a.raw)
				res := a.result(t)
				assert.Contains(t, string(res["content"]), "region=")
				return
			}
			assert.Equal(t, http.StatusBadRequest, a.status, a.raw)
			assert.Equal(t, int64(protocol.CodeHeaderMismatch), a.code(t), a.raw)
		})
	}
	// An argument that is absent (or null) needs no header.
	a := c.raw("tools/call", c.params(`{"name":"test_custom_headers","arguments":{"region":null}}`), nil)
	assert.Equal(t, http.StatusOK, a.status, a.raw)
}
