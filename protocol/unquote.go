package protocol

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// stringAt decodes the JSON string starting at data[i] (a quote; valid
// JSON) as encoding/json decodes it into a Go string, and returns the
// index just past it. A plain string (ASCII without escapes) is found and
// copied in one pass; others are found, then decoded by unquote.
func stringAt(data []byte, i int) (string, int, bool) {
	k, high := quoteOrEscape(data, i+1)
	if k < len(data) && data[k] == '"' && !high {
		return string(data[i+1 : k]), k + 1, true
	}
	end, _ := stringEndFrom(data, k, true)
	if end < 0 {
		return "", -1, false
	}
	s, ok := unquote(data[i:end])
	return s, end, ok
}

// unquote decodes the JSON string v (quotes included; valid JSON, as
// validJSON checks it: unquote does not look for raw quotes or control
// bytes) to the Go string encoding/json would decode it to: escapes
// decoded, and each byte of invalid UTF-8 and each unpaired surrogate
// escape replaced by U+FFFD. It reports false for a malformed escape.
// FuzzUnquote holds it to encoding/json.
//
// Why not json.Unmarshal: that validates the string once more with its
// byte-at-a-time scanner and copies the text twice. Here the runs between
// escapes and invalid bytes are found eight bytes at a time and copied
// once, straight into the string's memory.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	var b strings.Builder
	b.Grow(len(s)) // enough unless invalid UTF-8 is replaced
	start := 0     // s[start:i] is still to be copied as it is
	for i := 0; ; {
		i = asciiEnd(s, i)
		if i >= len(s) {
			break
		}
		if s[i] >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				b.Write(s[start:i])
				b.WriteRune(utf8.RuneError)
				start = i + 1
			}
			i += n
			continue
		}
		// A backslash.
		b.Write(s[start:i])
		if i+1 >= len(s) {
			return "", false
		}
		switch c := s[i+1]; c {
		case '"', '\\', '/', '\'':
			b.WriteByte(c)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(s[i:])
			if r < 0 {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair takes both escapes; anything else replaces the
				// first alone and leaves what follows to the next turn.
				if pair := utf16.DecodeRune(r, hex4(s[i:])); pair != unicode.ReplacementChar {
					r = pair
					i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			b.WriteRune(r)
			start = i
			continue
		default:
			return "", false
		}
		i += 2
		start = i
	}
	b.Write(s[start:])
	return b.String(), true
}

// hex4 returns the code unit of the \uXXXX escape s starts with, or -1.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
