package protocol

import (
	"encoding/json"
	"testing"
)

var benchResponse = []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"0123456789abcdef"}]}}`)

func BenchmarkDecodeResponse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(benchResponse); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCallToolResult(b *testing.B) {
	m, _ := Decode(benchResponse)
	b.ReportAllocs()
	for b.Loop() {
		var r CallToolResult
		if err := Unmarshal(m.Result, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeCallToolRequest(b *testing.B) {
	b.ReportAllocs()
	args := json.RawMessage(`{"text":"0123456789abcdef"}`)
	for b.Loop() {
		if _, err := AppendRequest(nil, Int64ID(12345), MethodToolsCall, CallToolParams{Name: "echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
}
