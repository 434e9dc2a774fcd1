package httpclient

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strings"
	"testing"
)

var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sun, 22 Nov 2026 13:00:00 GMT\r\nContent-Length: 11\r\n\r\n{\"a\":\"b\"}\n\n",
	"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\nX-Odd-Key: 1\r\nx-odd-key: 2\r\n\r\nabc",
	"HTTP/1.1 200\r\nMcp-Session-Id: s-1\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nBad Key: a\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Spaces:   v  \r\nContent-Length: 2\r\n\r\n{}",
}

// TestReadResponseAgreesWithNetHTTP checks the head parser against
// http.ReadResponse, on heads it takes and on heads it passes on.
func TestReadResponseAgreesWithNetHTTP(t *testing.T) {
	for _, raw := range responseSeeds {
		checkResponseAgrees(t, []byte(raw))
	}
	req, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	br := bufio.NewReader(strings.NewReader(responseSeeds[0]))
	br.Peek(1)
	if parseSimpleResponse(br, req) == nil {
		t.Fatal("the usual JSON answer did not take the fast path")
	}
}

func FuzzReadResponse(f *testing.F) {
	for _, raw := range responseSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkResponseAgrees(t, raw) })
}

func checkResponseAgrees(t *testing.T, raw []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	got, gotBody, gotErr := readAll(readResponse(bufio.NewReader(bytes.NewReader(raw)), req))
	want, wantBody, wantErr := readAll(http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), req))
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, net/http %v", raw, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
		got.ContentLength != want.ContentLength || got.Close != want.Close ||
		!reflect.DeepEqual(got.Header, want.Header) || gotBody != wantBody {
		t.Fatalf("%q:\ngot  %+v %q\nwant %+v %q", raw, got, gotBody, want, wantBody)
	}
}

func readAll(resp *http.Response, err error) (*http.Response, string, error) {
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// TestWriteRequestAgreesWithNetHTTP checks the request writer against
// http.Request.Write, byte for byte.
func TestWriteRequestAgreesWithNetHTTP(t *testing.T) {
	type header = map[string][]string
	for _, tc := range []struct {
		url, body string
		header    header
	}{
		{"http://127.0.0.1:8080/mcp", `{"jsonrpc":"2.0"}`, header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {"abc"}}},
		{"http://localhost/mcp?x=1&y=%20", `{}`, header{"User-Agent": {"mcpvisor/1.0"}, "B": {"2", "1"}, "A": {" trimmed\t"}}},
		{"http://[::1]:9/p", `{}`, header{"User-Agent": {""}, "X": {"new\r\nline"}, "Bad Key": {"dropped"}, "Content-Length": {"99"}}},
		{"http://host.example/", `x`, header{"Host": {"ignored"}, "Transfer-Encoding": {"ignored"}, "Trailer": {"ignored"}}},
		{"http://münchen.example/", `x`, nil},                  // IDNA: net/http's path
		{"http://h/", `x`, header{"Expect": {"100-continue"}}}, // net/http's path
	} {
		build := func() *http.Request {
			req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			return req
		}
		checkRequestAgrees(t, build(), build())
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("{}"))
	if _, ok := simpleRequest(req); !ok {
		t.Fatal("the usual POST did not take the fast path")
	}
	traced := req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{}))
	if _, ok := simpleRequest(traced); ok {
		t.Fatal("a traced request took the fast path")
	}
	short, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader("{}"))
	short.ContentLength = 5
	if err := writeRequest(bufio.NewWriter(io.Discard), short); err == nil {
		t.Fatal("a body shorter than its ContentLength was written without error")
	}
}

func FuzzWriteRequest(f *testing.F) {
	f.Add("/mcp", "Mcp-Session-Id", "abc", "User-Agent", "x", `{}`)
	f.Add("/p?q=1", "X", " a\r\nb ", "Accept", "", "body")
	f.Fuzz(func(t *testing.T, path, k1, v1, k2, v2, body string) {
		if body == "" {
			return
		}
		build := func() *http.Request {
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1"+path, strings.NewReader(body))
			if err != nil {
				return nil
			}
			req.Header[k1] = []string{v1}
			req.Header[k2] = append(req.Header[k2], v2)
			return req
		}
		a, b := build(), build()
		if a == nil {
			return
		}
		checkRequestAgrees(t, a, b)
	})
}

func checkRequestAgrees(t *testing.T, ours, theirs *http.Request) {
	t.Helper()
	var got, want bytes.Buffer
	bw := bufio.NewWriter(&got)
	gotErr := writeRequest(bw, ours)
	bw.Flush()
	wantErr := theirs.Write(&want)
	if (gotErr == nil) != (wantErr == nil) || got.String() != want.String() {
		t.Fatalf("request %s:\ngot  %q (%v)\nwant %q (%v)", ours.URL, got.String(), gotErr, want.String(), wantErr)
	}
}
