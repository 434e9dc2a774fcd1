package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode checks that no input makes the decoder panic, that every
// rejection is one of the typed errors, and that whatever it accepts
// re-encodes to a frame that decodes to the same message.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":"s","result":{"content":[{"type":"text","text":"x"}]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":[1]}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n",
		`not json at all`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		slow, slowErr := decodeSlow(bytes.TrimSpace(data))
		if (err == nil) != (slowErr == nil) || (err == nil && !reflect.DeepEqual(m, slow)) {
			t.Fatalf("fast and reference decoders disagree on %q:\nfast %+v\nslow %+v (%v)", data, m, slow, slowErr)
		}
		if err != nil {
			if !errors.Is(err, ErrParse) && !errors.Is(err, ErrBatch) && !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("untyped decode error %v for %q", err, data)
			}
			return
		}
		out, err := Encode(m)
		if err != nil {
			t.Fatalf("accepted %q but cannot re-encode: %v", data, err)
		}
		m2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", out, err)
		}
		if m.Kind != m2.Kind || m.ID != m2.ID || m.Method != m2.Method {
			t.Fatalf("round trip changed the envelope: %+v vs %+v", m, m2)
		}
	})
}

// FuzzCallToolResult checks that the scan of common tools/call results
// (scanCallToolResult) agrees with encoding/json wherever it accepts.
func FuzzCallToolResult(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"0123456789abcdef"}]}`,
		`{"content":[{"type":"text","text":"a\"b\u00e9"},{"type":"image","data":"AAA=","mimeType":"image/png"}],"isError":true}`,
		` { "content" : [ ] , "isError" : null , "structuredContent" : {"a":[1,2]} , "resultType" : "complete" } `,
		`{"content":null,"isError":false}`,
		`{"content":[{"type":"resource_link","uri":"file:///x","name":"x","title":"X","description":"d"}]}`,
		`{"content":[{"type":"text","text":null}],"content":[]}`,
		`{"content":[{"type":"text","Text":"case"}]}`,
		"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}",
		`{"_meta":{"a":1},"content":[]}`,
		`{"content":[],"extra":1}`,
		`{"content":[null]}`,
		`{"content":[{"type":1}]}`,
		`[]`,
		"{\"content\":[{\"type\":\"text\",\"text\":\"0123456789abcdefghij caf\xc3\xa9 and more text\"}]}",
		"{\"content\":[{\"type\":\"text\",\"text\":\"0123456789abcdefghij\\\"q\\\" and\\nmore \xff text\"}]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			// The scan is only given validated JSON: it may answer
			// anything, but must not panic.
			var r CallToolResult
			scanCallToolResult(data, &r)
			return
		}
		var fast CallToolResult
		if !scanCallToolResult(data, &fast) {
			return
		}
		var slow CallToolResult
		extra, err := decodeWithExtra(data, (*callToolResultAlias)(&slow))
		slow.Extra = extra
		if err != nil {
			t.Fatalf("scan accepted %q, encoding/json rejects it: %v", data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("scan and encoding/json disagree on %q:\nscan %#v\njson %#v", data, fast, slow)
		}
	})
}

// FuzzPlainStringMember checks PlainStringMember against encoding/json
// wherever it answers.
func FuzzPlainStringMember(f *testing.F) {
	for _, seed := range []string{
		`{"name":"echo","arguments":{"name":"inner"}}`,
		`{"Name":"a","name":"b"}`,
		`{"name":"a","name":"b"}`,
		`{"name":"caf\u00e9"}`,
		`{"name":1}`,
		` { "uri" : "file:///x" } `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		got, ok := PlainStringMember(data, "name")
		if !ok {
			return
		}
		var want struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(data, &want); err != nil || want.Name != got {
			t.Fatalf("PlainStringMember(%q) = %q, encoding/json: %q (%v)", data, got, want.Name, err)
		}
	})
}

// RawMember agrees with encoding/json whenever it answers.
func FuzzRawMember(f *testing.F) {
	for _, s := range []string{`{"name":"a","arguments":{"x":1}}`, `{"Name":"a"}`, `{"name":1,"name":2}`, `{"n\u0061me":"x"}`, `[]`, `{"arguments":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		v, found, ok := RawMember(data, "name")
		if !ok {
			return
		}
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("RawMember answered for %q, which is not an object", data)
		}
		want, has := ref["name"]
		if has != found || (found && !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(v))) {
			t.Fatalf("RawMember(%q) = %q, %v; encoding/json: %q, %v", data, v, found, want, has)
		}
	})
}
