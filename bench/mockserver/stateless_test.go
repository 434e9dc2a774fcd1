package mockserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// modernParams returns params of the stateless era: extra plus the _meta
// every request carries.
func modernParams(version string, extra map[string]any) map[string]any {
	p := map[string]any{"_meta": map[string]any{
		protocol.MetaProtocolVersion:    version,
		protocol.MetaClientInfo:         map[string]any{"name": "test", "version": "1"},
		protocol.MetaClientCapabilities: map[string]any{},
	}}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func listenReq() map[string]any {
	return modernParams(protocol.Version20260728, map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
}

// statelessPost POSTs a request of the stateless era, with Mcp-Method set
// to method, MCP-Protocol-Version to the version its _meta names and
// Mcp-Name to its name (or URI), as a client of that era sends them,
// unless hdr says otherwise.
func statelessPost(t *testing.T, url string, id int64, method string, params any, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodPost, url, bytes.NewReader(encode(t, id, method, params)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(headerMethod, method)
	if p, ok := params.(map[string]any); ok {
		if meta, ok := p["_meta"].(map[string]any); ok {
			if v, ok := meta[protocol.MetaProtocolVersion].(string); ok {
				req.Header.Set(headerProtocolVersion, v)
			}
		}
		for _, k := range []string{"name", "uri"} {
			if v, ok := p[k].(string); ok {
				req.Header.Set(headerName, v)
			}
		}
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// errorCode reads a JSON-RPC error response and returns its code.
func errorCode(t *testing.T, resp *http.Response) int64 {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	m := message(t, b)
	if m.Error == nil {
		t.Fatalf("not an error: %s", b)
	}
	return m.Error.Code
}

func TestStateless(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	v := protocol.Version20260728

	resp := statelessPost(t, srv.URL, 1, protocol.MethodDiscover, modernParams(v, nil), nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(headerSessionID) != "" {
		t.Fatalf("discover: status %d, session %q", resp.StatusCode, resp.Header.Get(headerSessionID))
	}
	var disc protocol.DiscoverResult
	result(t, readResponse(t, resp, protocol.Int64ID(1)), &disc)
	if !slices.Contains(disc.SupportedVersions, v) {
		t.Fatalf("discover result %+v", disc)
	}

	call := modernParams(v, echoParams("stateless"))
	resp = statelessPost(t, srv.URL, 2, protocol.MethodToolsCall, call, map[string]string{headerName: "echo", headerProtocolVersion: v})
	if resp.StatusCode != http.StatusOK || resp.Header.Get(headerSessionID) != "" {
		t.Fatalf("tools/call: status %d", resp.StatusCode)
	}
	if got := callText(t, readResponse(t, resp, protocol.Int64ID(2))); got != "stateless" {
		t.Fatalf("echo answered %q", got)
	}
	resp = statelessPost(t, srv.URL, 3, protocol.MethodToolsList, modernParams(v, nil), nil)
	if names := toolNames(t, readResponse(t, resp, protocol.Int64ID(3))); !slices.Contains(names, "echo") {
		t.Fatalf("tools %v", names)
	}

	for _, tc := range []struct {
		name   string
		method string
		params any
		hdr    map[string]string
		code   int64
	}{
		{"Mcp-Method mismatch", protocol.MethodToolsCall, call, map[string]string{headerMethod: protocol.MethodToolsList}, protocol.CodeHeaderMismatch},
		{"Mcp-Method missing", protocol.MethodToolsCall, call, map[string]string{headerMethod: ""}, protocol.CodeHeaderMismatch},
		{"Mcp-Name mismatch", protocol.MethodToolsCall, call, map[string]string{headerName: "add"}, protocol.CodeHeaderMismatch},
		{"version header mismatch", protocol.MethodToolsList, modernParams(v, nil), map[string]string{headerProtocolVersion: "2026-12-31"}, protocol.CodeHeaderMismatch},
		{"unsupported version", protocol.MethodToolsList, modernParams("2027-01-01", nil), nil, protocol.CodeUnsupportedProtocolVersion},
		{"discover without _meta", protocol.MethodDiscover, nil, nil, protocol.CodeInvalidParams},
	} {
		resp := statelessPost(t, srv.URL, 4, tc.method, tc.params, tc.hdr)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", tc.name, resp.StatusCode)
			continue
		}
		if code := errorCode(t, resp); code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.code)
		}
	}

	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, srv.URL, nil)
		req.Header.Set(headerProtocolVersion, v)
		resp, err := oneShot.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", method, resp.StatusCode)
		}
	}
}

// TestStatelessOnly: a server of the stateless era alone refuses GET and
// DELETE whatever the headers.
func TestStatelessOnly(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, Versions: []string{protocol.Version20260728}})
	resp, err := oneShot.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: status %d, want 405", resp.StatusCode)
	}
}

// TestLegacyOnlyRejectsModern: a server without the stateless era answers
// a modern request like any legacy server (400, no -32022), which is
// a client's cue to fall back to initialize.
func TestLegacyOnlyRejectsModern(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, Versions: []string{protocol.Version20251125}})
	resp := statelessPost(t, srv.URL, 1, protocol.MethodDiscover, modernParams(protocol.Version20260728, nil), nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	if code := errorCode(t, resp); code == protocol.CodeUnsupportedProtocolVersion {
		t.Fatalf("a legacy server answered %d", code)
	}
}

func TestStatelessSSEResponses(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP, SSEResponses: true})
	resp := statelessPost(t, srv.URL, 1, protocol.MethodToolsCall, modernParams(protocol.Version20260728, echoParams("s")), nil)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	ev, err := newSSEReader(resp.Body).next()
	if err != nil || ev.hasID {
		t.Fatalf("event %+v, %v: want one without an id", ev, err)
	}
	if got := callText(t, message(t, []byte(ev.data))); got != "s" {
		t.Fatalf("echo answered %q", got)
	}
}

// readSubscription reads the next event of a listen stream and checks it
// is method tagged with subscription id.
func readSubscription(t *testing.T, r *sseReader, method string, id protocol.ID) *protocol.Message {
	t.Helper()
	ev, err := r.next()
	if err != nil {
		t.Fatalf("listen stream: %v", err)
	}
	return checkSubscription(t, []byte(ev.data), method, id)
}

func checkSubscription(t *testing.T, data []byte, method string, id protocol.ID) *protocol.Message {
	t.Helper()
	m := message(t, data)
	var p struct {
		Meta protocol.Meta `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatal(err)
	}
	var sub protocol.ID
	if m.Method != method || !p.Meta.Get(protocol.MetaSubscriptionID, &sub) || sub != id {
		t.Fatalf("got %s, want %s for subscription %v", data, method, id)
	}
	return m
}

func TestListen(t *testing.T) {
	srv := serve(t, Options{Transport: TransportHTTP})
	listen := statelessPost(t, srv.URL, 77, protocol.MethodSubscriptionsListen, listenReq(), nil)
	if listen.StatusCode != http.StatusOK || listen.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("listen: status %d, %q", listen.StatusCode, listen.Header.Get("Content-Type"))
	}
	r := newSSEReader(listen.Body)
	ack := readSubscription(t, r, protocol.NotificationSubscriptionsAck, protocol.Int64ID(77))
	var p struct {
		Notifications map[string]bool `json:"notifications"`
	}
	if err := json.Unmarshal(ack.Params, &p); err != nil || !p.Notifications["toolsListChanged"] {
		t.Fatalf("acknowledged %s", ack.Params)
	}

	announce := modernParams(protocol.Version20260728, map[string]any{"name": "announce", "arguments": map[string]any{"text": "n"}})
	resp := statelessPost(t, srv.URL, 78, protocol.MethodToolsCall, announce, nil)
	callText(t, readResponse(t, resp, protocol.Int64ID(78)))
	readSubscription(t, r, protocol.NotificationToolsListChanged, protocol.Int64ID(77))
}

func TestListenCut(t *testing.T) {
	const cut = 150 * time.Millisecond
	srv := serve(t, Options{Transport: TransportHTTP, ListenCut: cut})
	start := time.Now()
	listen := statelessPost(t, srv.URL, 1, protocol.MethodSubscriptionsListen, listenReq(), nil)
	r := newSSEReader(listen.Body)
	readSubscription(t, r, protocol.NotificationSubscriptionsAck, protocol.Int64ID(1))
	if ev, err := r.next(); err != io.EOF {
		t.Fatalf("after the acknowledgement: %+v, %v; want the end", ev, err)
	}
	if d := time.Since(start); d < cut || d > waitFor {
		t.Fatalf("cut after %v, want %v", d, cut)
	}
}

// TestListenWS: on a connection transport the subscription's messages
// share the connection, and the untagged list_changed stops.
func TestListenWS(t *testing.T) {
	srv := serve(t, Options{Transport: TransportWS})
	c := dialWS(t, srv.URL).(*streamClient)
	c.send(t, encode(t, 500, protocol.MethodSubscriptionsListen, listenReq()))
	note := waitNote(t, c, protocol.NotificationSubscriptionsAck)
	checkSubscription(t, mustEncode(t, note), protocol.NotificationSubscriptionsAck, protocol.Int64ID(500))
	announce := modernParams(protocol.Version20260728, map[string]any{"name": "announce", "arguments": map[string]any{"text": "w"}})
	callText(t, c.request(t, protocol.MethodToolsCall, announce))
	select {
	case m := <-c.notes():
		checkSubscription(t, mustEncode(t, m), protocol.NotificationToolsListChanged, protocol.Int64ID(500))
	case <-time.After(waitFor):
		t.Fatal("no list_changed")
	}
	select {
	case m := <-c.notes():
		t.Fatalf("unexpected %s", mustEncode(t, m))
	case <-time.After(50 * time.Millisecond):
	}
}

func mustEncode(t *testing.T, m *protocol.Message) []byte {
	t.Helper()
	b, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListenResourceSubscriptions: with Subscribe, a listen stream's
// resourceSubscriptions are agreed for the server's own (mock://) URIs
// only, and a touched URI's resources/updated goes, tagged, to the streams
// that selected it and no other. On a connection transport,
// notifications/cancelled naming the listen request ends the stream.
func TestListenResourceSubscriptions(t *testing.T) {
	const uri = "mock://resource/1"
	srv := serve(t, Options{Transport: TransportHTTP, Subscribe: true, Resources: 1})
	resources := modernParams(protocol.Version20260728, map[string]any{"notifications": map[string]any{
		"resourceSubscriptions": []string{uri, "other://x"}}})
	r := newSSEReader(statelessPost(t, srv.URL, 10, protocol.MethodSubscriptionsListen, resources, nil).Body)
	ack := readSubscription(t, r, protocol.NotificationSubscriptionsAck, protocol.Int64ID(10))
	var p struct {
		Notifications protocol.NotificationSubscriptions `json:"notifications"`
	}
	if err := json.Unmarshal(ack.Params, &p); err != nil || !slices.Equal(p.Notifications.ResourceSubscriptions, []string{uri}) {
		t.Fatalf("acknowledged %s, want only %s", ack.Params, uri)
	}
	tools := newSSEReader(statelessPost(t, srv.URL, 11, protocol.MethodSubscriptionsListen, listenReq(), nil).Body)
	readSubscription(t, tools, protocol.NotificationSubscriptionsAck, protocol.Int64ID(11))

	touch := modernParams(protocol.Version20260728, map[string]any{"name": "touch", "arguments": map[string]any{"uri": uri}})
	callText(t, readResponse(t, statelessPost(t, srv.URL, 12, protocol.MethodToolsCall, touch, nil), protocol.Int64ID(12)))
	updated := readSubscription(t, r, protocol.NotificationResourceUpdated, protocol.Int64ID(10))
	var u protocol.ResourceUpdatedParams
	if err := json.Unmarshal(updated.Params, &u); err != nil || u.URI != uri {
		t.Fatalf("updated %s", updated.Params)
	}
	announce := modernParams(protocol.Version20260728, map[string]any{"name": "announce", "arguments": map[string]any{"text": "n"}})
	callText(t, readResponse(t, statelessPost(t, srv.URL, 13, protocol.MethodToolsCall, announce, nil), protocol.Int64ID(13)))
	readSubscription(t, tools, protocol.NotificationToolsListChanged, protocol.Int64ID(11)) // not resources/updated first

	ws := serve(t, Options{Transport: TransportWS, Subscribe: true, Resources: 1})
	c := dialWS(t, ws.URL).(*streamClient)
	c.send(t, encode(t, 20, protocol.MethodSubscriptionsListen, resources))
	waitNote(t, c, protocol.NotificationSubscriptionsAck)
	c.notify(t, protocol.NotificationCancelled, map[string]any{"requestId": 20})
	if got := callText(t, c.request(t, protocol.MethodToolsCall, touch)); got != "touched "+uri+" (subscribed: false)" {
		t.Fatalf("after cancelling the stream: %q", got)
	}
}
