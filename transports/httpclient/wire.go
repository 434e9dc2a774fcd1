package httpclient

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The HTTP/1.1 heads of the inline transport's usual exchange, an MCP POST
// answered with a JSON body of known length, are written and parsed here
// rather than by http.Request.Write and http.ReadResponse; every other
// request or response goes to those.
//
// Why: in the HTTPCallConcurrent32 peer benchmark (bench/peers) writing
// and parsing the heads was about 10 % of the client's CPU per call
// (header sorting, fmt, transfer-encoding bookkeeping, a textproto
// allocation per line). Measured on a typical MCP POST and its answer:
// writing 2.4 → 1.3 µs and 7 → 0 allocations, parsing 1.3 → 0.9 µs and
// 10 → 6 allocations (12 fewer per call in the peer benchmark, 67 → 55).
// They must produce and accept exactly what net/http does: wire_test.go
// compares them with it (FuzzWriteRequest, FuzzReadResponse).

// writeRequest writes req to bw, byte for byte as req.Write would.
func writeRequest(bw *bufio.Writer, req *http.Request) error {
	host, ok := simpleRequest(req)
	if !ok {
		return req.Write(bw)
	}
	defer req.Body.Close()
	bw.WriteString("POST ")
	bw.WriteString(req.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	userAgent := "Go-http-client/1.1"
	if _, set := req.Header["User-Agent"]; set {
		userAgent = req.Header.Get("User-Agent")
	}
	if userAgent != "" { // tested before trimming, as net/http does
		bw.WriteString("User-Agent: ")
		bw.WriteString(headerValue(userAgent))
		bw.WriteString("\r\n")
	}
	bw.WriteString("Content-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), req.ContentLength, 10))
	bw.WriteString("\r\n")

	var keysArray [16]string
	keys := keysArray[:0]
	for k := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		if validKey(k) { // net/http drops invalid names
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(headerValue(v))
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")

	n, err := io.Copy(bw, req.Body)
	if err != nil {
		return err
	}
	if n != req.ContentLength {
		return fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return nil
}

// simpleRequest reports whether req is a POST writeRequest handles, and
// its Host header: a plain ASCII host, a body in memory of known length
// (net/http flushes the head before any other body), no trailers,
// transfer encodings, Expect, Connection: close or client trace.
func simpleRequest(req *http.Request) (host string, ok bool) {
	if req.Method != http.MethodPost || req.Close || len(req.TransferEncoding) > 0 || req.Trailer != nil ||
		req.URL == nil || req.URL.Opaque != "" || req.ContentLength <= 0 || req.Body == nil || !inMemory(req.Body) {
		return "", false
	}
	if _, expect := req.Header["Expect"]; expect {
		return "", false
	}
	if httptrace.ContextClientTrace(req.Context()) != nil {
		return "", false
	}
	host = req.Host
	if host == "" {
		host = req.URL.Host
	}
	if host == "" {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return "", false // IDNA, zones, or worse: net/http's job
		}
	}
	if !validText(req.URL.RequestURI()) || strings.ContainsRune(req.URL.RequestURI(), ' ') {
		return "", false
	}
	return host, true
}

// inMemory reports whether net/http would treat body as a known
// in-memory reader (isKnownInMemoryReader), looking through io.NopCloser.
func inMemory(body io.Reader) bool {
	if t := reflect.TypeOf(body); t == nopCloserType || t == nopCloserWriterToType {
		body = reflect.ValueOf(body).Field(0).Interface().(io.Reader)
	}
	switch body.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	return false
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(bytes.NewReader(nil)))
)

// headerValue is a header value as net/http writes it: CR and LF become
// spaces, and surrounding ASCII space goes.
func headerValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	return textproto.TrimString(v)
}

// readResponse reads a response's head from br, as http.ReadResponse does.
// The usual answer, an HTTP/1.1 head that arrived whole, with a
// Content-Length and nothing that changes the framing, is parsed here: its
// text becomes one string that the status and header values slice.
// Anything else (chunked or close-delimited bodies, 1xx/204/304, HEAD,
// Connection, Pragma or Trailer headers, folded lines, a head split
// across reads, bytes net/http would reject) goes to http.ReadResponse,
// before anything has been consumed.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if _, err := br.Peek(1); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // as http.ReadResponse says it
		}
		return nil, err
	}
	if resp := parseSimpleResponse(br, req); resp != nil {
		return resp, nil
	}
	return http.ReadResponse(br, req)
}

// parseSimpleResponse parses a head already buffered in br and consumes
// it, or returns nil having consumed nothing.
func parseSimpleResponse(br *bufio.Reader, req *http.Request) *http.Response {
	if req.Method == http.MethodHead {
		return nil
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 || !bytes.HasPrefix(buf, []byte("HTTP/1.1 ")) {
		return nil
	}
	head := string(buf[:end+2]) // each line with its CRLF
	line, rest, _ := strings.Cut(head, "\r\n")
	status := line[len("HTTP/1.1 "):]
	if len(status) < 3 || (len(status) > 3 && status[3] != ' ') || !validText(status) {
		return nil
	}
	code, err := strconv.Atoi(status[:3])
	if err != nil || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}

	lines := strings.Count(rest, "\r\n")
	header := make(http.Header, lines)
	values := make([]string, lines) // one backing array for the values
	contentLength := int64(-1)
	for i := 0; rest != ""; i++ {
		line, rest, _ = strings.Cut(rest, "\r\n")
		k, v, ok := strings.Cut(line, ":")
		if !ok || !validKey(k) || !validText(v) {
			return nil // includes folded lines (a leading space or tab)
		}
		v = strings.Trim(v, " \t")
		key, known := commonKeys[k]
		if !known {
			key = textproto.CanonicalMIMEHeaderKey(k)
		}
		switch key {
		case "Content-Length":
			if contentLength >= 0 || v == "" {
				return nil
			}
			n, err := strconv.ParseUint(v, 10, 63)
			if err != nil {
				return nil
			}
			contentLength = int64(n)
		case "Transfer-Encoding", "Connection", "Pragma", "Trailer":
			return nil // framing, or headers net/http rewrites
		}
		if prev, ok := header[key]; ok {
			header[key] = append(prev, v)
		} else {
			values[i] = v
			header[key] = values[i : i+1 : i+1]
		}
	}
	if contentLength < 0 {
		return nil
	}

	br.Discard(end + 4)
	resp := &http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		ContentLength: contentLength,
		Request:       req,
		Body:          http.NoBody,
	}
	if contentLength > 0 {
		resp.Body = &fixedBody{r: br, left: contentLength}
	}
	return resp
}

// commonKeys maps the header keys MCP servers usually send, as sent and
// lower-cased, to their canonical form, so that looking them up costs no
// allocation.
var commonKeys = map[string]string{}

func init() {
	for _, k := range []string{
		"Content-Type", "Content-Length", "Date", "Server", "Cache-Control",
		"Mcp-Session-Id", "Mcp-Protocol-Version", "Retry-After", "Www-Authenticate",
		"Vary", "Access-Control-Allow-Origin", "X-Accel-Buffering",
	} {
		commonKeys[k] = k
		commonKeys[strings.ToLower(k)] = k
	}
}

// validKey reports whether k is a header field name (an RFC 9110 token).
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

// validText reports whether s holds no control bytes other than tab.
func validText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// fixedBody is a body of known length read from the connection's buffered
// reader. A connection that ends before the length is an
// io.ErrUnexpectedEOF, as with net/http.
type fixedBody struct {
	r    *bufio.Reader
	left int64
}

func (b *fixedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *fixedBody) Close() error { return nil }
