package protocol

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var unquoteCases = []string{
	`""`,
	`"plain"`,
	`"a\"b\\c\/d\be\ff\ng\rh\ti"`,
	`"caf\u00e9 \u00C9"`,
	`"\ud83d\ude00"`,       // a surrogate pair
	`"\ud83d"`,             // a lone high surrogate
	`"\ude00\ud83d"`,       // low then high: two replacements
	`"\ud83d\u0041"`,       // high then a non-surrogate
	`"\ud83d\ud83d\ude00"`, // high, then a pair
	`"\ud83dx"`,            // high, then no escape at all
	`"\u0000\u001f\u007f"`, // control characters, escaped
	"\"h\xc3\xa9llo w\xc3\xb6rld\"",
	"\"\xff\xfe\"",            // invalid UTF-8
	"\"\xc3\\n\xa9\"",         // a rune broken by an escape
	"\"\xed\xa0\x80\"",        // a surrogate encoded in UTF-8
	"\"\xf0\x9f\x98\x80\"",    // a four-byte rune
	"\"\xf0\x9f\x98\"",        // a truncated one
	"\"\xe2\x82\xac\\u20ac\"", // the euro sign, raw and escaped
}

func TestUnquote(t *testing.T) {
	for _, in := range unquoteCases {
		require.True(t, json.Valid([]byte(in)), "test case %q is not valid JSON", in)
		var want string
		require.NoError(t, json.Unmarshal([]byte(in), &want))
		got, ok := unquote([]byte(in))
		assert.True(t, ok, "unquote(%q)", in)
		assert.Equal(t, want, got, "unquote(%q)", in)
	}
	for _, bad := range []string{``, `"`, `x`, `"\"`, `"\u12"`, `"\x"`, `"\`} {
		_, ok := unquote([]byte(bad))
		assert.False(t, ok, "unquote(%q)", bad)
	}
}

// FuzzUnquote checks unquote against encoding/json on every valid JSON
// string.
func FuzzUnquote(f *testing.F) {
	for _, in := range unquoteCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			data = append([]byte{'"'}, data...)
		}
		if !json.Valid(data) {
			unquote(data) // must not panic
			return
		}
		data = bytes.TrimSpace(data) // unquote is given the string alone
		var want string
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", data, err)
		}
		got, ok := unquote(data)
		if !ok || got != want {
			t.Fatalf("unquote(%q) = %q, %v; encoding/json: %q", data, got, ok, want)
		}
	})
}
