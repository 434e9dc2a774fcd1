package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// largeResultFrame is a tools/call response frame whose single text block
// holds text, encoded as a server would send it.
func largeResultFrame(tb testing.TB, text string) []byte {
	tb.Helper()
	frame, err := AppendResult(nil, Int64ID(7), CallToolResult{Content: []Content{{Type: ContentText, Text: text}}})
	if err != nil {
		tb.Fatal(err)
	}
	return frame
}

// proseText is n bytes of text with what real tool output has: newlines
// and tabs (escaped on the wire), quotes, and some non-ASCII letters.
func proseText(n int) string {
	const line = "func main() {\n\tfmt.Println(\"héllo, wörld\") // naïve café\n}\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// BenchmarkDecodeLargeResult measures what a client does with a large
// tools/call answer: decode the frame, then decode the result.
func BenchmarkDecodeLargeResult(b *testing.B) {
	for _, tc := range []struct {
		name string
		text string
	}{
		{"ascii-64KiB", strings.Repeat("x", 64<<10)},
		{"ascii-1MiB", strings.Repeat("x", 1<<20)},
		{"prose-64KiB", proseText(64 << 10)},
		{"prose-1MiB", proseText(1 << 20)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			frame := largeResultFrame(b, tc.text)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := Decode(frame)
				if err != nil {
					b.Fatal(err)
				}
				var r CallToolResult
				if err := Unmarshal(m.Result, &r); err != nil {
					b.Fatal(err)
				}
				if len(r.Content) != 1 || len(r.Content[0].Text) != len(tc.text) {
					b.Fatal("wrong text")
				}
			}
		})
	}
}

// BenchmarkScanLarge measures the passes over a large frame one by one.
func BenchmarkScanLarge(b *testing.B) {
	for _, tc := range []struct {
		name string
		text string
	}{
		{"ascii-1MiB", strings.Repeat("x", 1<<20)},
		{"prose-1MiB", proseText(1 << 20)},
	} {
		frame := largeResultFrame(b, tc.text)
		text := frame[bytes.Index(frame, []byte(`"text":`))+len(`"text":`):]
		b.Run("validJSON/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if !validJSON(frame) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run("json.Valid/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if !json.Valid(frame) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run("stringEnd/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if end, _ := stringEnd(text, 0); end < 0 {
					b.Fatal("unterminated")
				}
			}
		})
		b.Run("unquote/"+tc.name, func(b *testing.B) {
			end, _ := stringEnd(text, 0)
			b.SetBytes(int64(end))
			for b.Loop() {
				if _, ok := unquote(text[:end]); !ok {
					b.Fatal("unquote")
				}
			}
		})
	}
}
