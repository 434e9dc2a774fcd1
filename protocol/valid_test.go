package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// validCases are inputs whose validity is tricky; every one is checked
// against encoding/json.Valid, and they seed FuzzValidJSON.
var validCases = []struct {
	in    string
	valid bool
}{
	{``, false},
	{` `, false},
	{" \t\r\n", false},
	{`{}`, true},
	{`[]`, true},
	{` { } `, true},
	{`[ ]`, true},
	{`{]`, false},
	{`[}`, false},
	{`{"a":1,}`, false},
	{`[1,]`, false},
	{`[,1]`, false},
	{`{"a" 1}`, false},
	{`{"a":}`, false},
	{`{1:2}`, false},
	{`{"a":1 "b":2}`, false},
	{`{"a":[1,{"b":null}],"c":"d"}`, true},
	{`[[[]]]`, true},
	{`[[[]]`, false},
	{`[]]`, false},
	{`{}}`, false},
	{`{} {}`, false},
	{`{}x`, false},
	{`1 2`, false},
	{"\x00", false},
	{"\u00a0{}", false},
	{"\v{}", false},
	{"\f{}", false},
	// Literals.
	{`true`, true},
	{`false`, true},
	{`null`, true},
	{`tru`, false},
	{`nul`, false},
	{`nulll`, false},
	{`True`, false},
	{`[true,false,null]`, true},
	// Numbers.
	{`0`, true},
	{`-0`, true},
	{`-0.0e-0`, true},
	{`1e5`, true},
	{`1E+5`, true},
	{`1.5e-07`, true},
	{`01`, false},
	{`-01`, false},
	{`00`, false},
	{`-`, false},
	{`+1`, false},
	{`.5`, false},
	{`1.`, false},
	{`1.e5`, false},
	{`1e`, false},
	{`1e+`, false},
	{`1ee5`, false},
	{`0x10`, false},
	{`NaN`, false},
	{`Infinity`, false},
	{`-Infinity`, false},
	{`123456789012345678901234567890`, true},
	{`[1,-2.5,3e3]`, true},
	{`{"a":-}`, false},
	// Strings.
	{`""`, true},
	{`"`, false},
	{`"abc`, false},
	{`"abc\"`, false},
	{`"a\"b"`, true},
	{`"\\"`, true},
	{`"\/\b\f\n\r\t"`, true},
	{`"\'"`, false},
	{`"\a"`, false},
	{`"\x41"`, false},
	{`"\u00e9"`, true},
	{`"\u00E9\uD83D\uDE00"`, true},
	{`"\ud800"`, true}, // a lone surrogate is valid syntax
	{`"\u00g0"`, false},
	{`"\u00"`, false},
	{`"\u`, false},
	{`"\`, false},
	{"\"tab\there\"", false},
	{"\"nl\nhere\"", false},
	{"\"\x1f\"", false},
	{"\"\x7f\"", true},
	{"\"\xff\xfe\"", true}, // invalid UTF-8 is not rejected
	{"\"\xed\xa0\x80\"", true},
	{"\"h\xc3\xa9llo\"", true},
	// Escapes, quotes and control bytes at each position around the
	// eight-byte words the scan reads.
	{`"1234567\""`, true},
	{`"12345678\""`, true},
	{`"123456\\"`, true},
	{`"1234567\\"`, true},
	{`"1234567\u0041"`, true},
	{`"123456\u0041"`, true},
	{`"1234567\u004"`, false},
	{"\"1234567\x01\"", false},
	{"\"12345678\x01\"", false},
	{"\"123456789abcdef\x00\"", false},
	{`"123456789abcdef"`, true},
	{`"123456789abcdefg"`, true},
	{`"123456789abcdef`, false},
	{"\"\x80\x80\x80\x80\x80\x80\x80\"", true},
	{"\"\xa2\xa2\xa2\xa2\xa2\xa2\xa2\xa2\xa2\"", true}, // 0xa2 = 0x80|'"'
	{"\"\xdc\xdc\xdc\xdc\xdc\xdc\xdc\xdc\xdc\"", true}, // 0xdc = 0x80|'\\'
	{"\"!!!!!!!!!!\x21\x20\x22", true},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n", true},
	// Past the first sixteen bytes, where long strings are scanned with
	// bytes.IndexByte.
	{`"0123456789abcdefghijklmnopqrstuvwxyz"`, true},
	{`"0123456789abcdefghij\"klmnopqrstuvwxyz"`, true},
	{`"0123456789abcdefghij\\"`, true},
	{`"0123456789abcdefghij\u00e9klmnopqrstuvwxyz"`, true},
	{`"0123456789abcdefghij\u00zzklmnopqrstuvwxyz"`, false},
	{"\"0123456789abcdefghij\x01klmnopqrstuvwxyz\"", false},
	{"\"0123456789abcdefghijklmnopqrstuvwxy\x1f\"", false},
	{"\"0123456789abcdefghij\\\\klmnopqrstuvwx\nyz\"", false},
	{"\"0123456789abcdefghij\xc3\xa9klmnopqrstuvwxyz\"", true},
	{"\"0123456789abcdefghij\xc3\xa9klm\\tnopqrstuvwxyz\"", true},
	{`"0123456789abcdefghijklmnopqrstuvwxyz`, false},
	{`["0123456789abcdefghijklmnopqrstuvwxyz","0123456789abcdefghijklmnopqrstuvwxyz"]`, true},
}

func TestValidJSON(t *testing.T) {
	for _, tc := range validCases {
		assert.Equal(t, tc.valid, json.Valid([]byte(tc.in)), "test case is wrong: json.Valid(%q)", tc.in)
		assert.Equal(t, tc.valid, validJSON([]byte(tc.in)), "validJSON(%q)", tc.in)
	}
}

func TestValidJSONDepth(t *testing.T) {
	for _, depth := range []int{1, 63, 64, 65, 127, 128, 129, 1000, maxNestingDepth - 1, maxNestingDepth, maxNestingDepth + 1, 100000} {
		for _, open := range []string{"[", `{"k":`} {
			closer := "]"
			if open != "[" {
				closer = "}"
			}
			in := []byte(strings.Repeat(open, depth) + "0" + strings.Repeat(closer, depth))
			assert.Equal(t, json.Valid(in), validJSON(in), "depth %d of %s", depth, open)
			assert.Equal(t, depth <= maxNestingDepth, validJSON(in), "depth %d of %s", depth, open)
			// Unbalanced: one container left open, or one too many closed.
			assert.False(t, validJSON(in[:len(in)-1]), "depth %d of %s, unclosed", depth, open)
			assert.False(t, validJSON(append(in, closer...)), "depth %d of %s, closed twice", depth, open)
		}
	}
	// Containers of both kinds mixed across the 64-level words of the
	// bit stack: a wrong bit would accept a mismatched bracket.
	var open, shut strings.Builder
	for d := range 200 {
		if d%3 == 0 {
			open.WriteString(`{"k":`)
		} else {
			open.WriteString("[")
		}
	}
	for d := 199; d >= 0; d-- {
		if d%3 == 0 {
			shut.WriteString("}")
		} else {
			shut.WriteString("]")
		}
	}
	in := open.String() + "1" + shut.String()
	assert.True(t, validJSON([]byte(in)))
	swapped := []byte(in)
	swapped[len(swapped)-200+37] ^= '}' ^ ']' // swap one bracket's kind
	assert.False(t, validJSON(swapped))
	assert.False(t, json.Valid(swapped))
}

// FuzzValidJSON checks validJSON against encoding/json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", data, got, want)
		}
	})
}

// stringEndBytewise is the byte-at-a-time stringEnd that the word-wise
// one replaced; FuzzStringEnd holds them to the same answers.
func stringEndBytewise(data []byte, i int) (int, bool) {
	special := false
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '\\':
			special = true
			j++
		case c == '"':
			return j + 1, special
		case c >= 0x80:
			special = true
		}
	}
	return -1, special
}

func FuzzStringEnd(f *testing.F) {
	for _, tc := range validCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			data = append([]byte{'"'}, data...)
		}
		gotEnd, gotSpecial := stringEnd(data, 0)
		wantEnd, wantSpecial := stringEndBytewise(data, 0)
		if gotEnd != wantEnd || (gotEnd >= 0 && gotSpecial != wantSpecial) {
			t.Fatalf("stringEnd(%q) = %d, %v; byte-wise: %d, %v", data, gotEnd, gotSpecial, wantEnd, wantSpecial)
		}
	})
}
