package protocol

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// unquote decodes the JSON string v (quotes included; valid JSON, as
// validJSON checks it) to the Go string encoding/json would decode it to:
// escapes decoded, and each byte of invalid UTF-8 and each unpaired
// surrogate escape replaced by U+FFFD. It reports false for a malformed
// string. FuzzUnquote holds it to encoding/json.
//
// Why not json.Unmarshal: that validates the string once more with its
// byte-at-a-time scanner and copies the text twice. Here the text between
// escapes is found with bytes.IndexByte and copied in runs, once.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	var b strings.Builder
	b.Grow(len(s))
	for {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			writeUTF8(&b, s)
			return b.String(), true
		}
		writeUTF8(&b, s[:k])
		s = s[k:]
		if len(s) < 2 {
			return "", false
		}
		switch c := s[1]; c {
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
			r := hex4(s)
			if r < 0 {
				return "", false
			}
			s = s[6:]
			if utf16.IsSurrogate(r) {
				// A pair takes both escapes; anything else replaces the
				// first alone and leaves what follows to the next turn.
				if pair := utf16.DecodeRune(r, hex4(s)); pair != unicode.ReplacementChar {
					b.WriteRune(pair)
					s = s[6:]
					continue
				}
				r = unicode.ReplacementChar
			}
			b.WriteRune(r)
			continue
		default:
			return "", false
		}
		s = s[2:]
	}
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

// writeUTF8 writes s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as encoding/json does.
func writeUTF8(b *strings.Builder, s []byte) {
	if utf8.Valid(s) {
		b.Write(s)
		return
	}
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.Write(s[:n])
		}
		s = s[n:]
	}
}
