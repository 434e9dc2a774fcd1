package protocol

import (
	"bytes"
	"encoding/json"
)

// FindID extracts the top-level JSON-RPC id from the start of a frame,
// for failing the call a truncated or broken frame (or an oversize one,
// of which only a prefix was kept) was answering. It is a
// best effort over a prefix, not a parser.
func FindID(b []byte) (ID, bool) {
	depth := 0
	inStr := false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if inStr {
			switch ch {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch ch {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			if depth == 1 && bytes.HasPrefix(b[i:], []byte(`"id"`)) {
				rest := bytes.TrimLeft(b[i+4:], " \t\r\n")
				if len(rest) > 0 && rest[0] == ':' {
					return parseIDValue(bytes.TrimLeft(rest[1:], " \t\r\n"))
				}
			}
			inStr = true
		}
	}
	return ID{}, false
}

func parseIDValue(b []byte) (ID, bool) {
	end := 0
	if len(b) > 0 && b[0] == '"' {
		for end = 1; end < len(b) && b[end] != '"'; end++ {
			if b[end] == '\\' {
				end++
			}
		}
		end++
	} else {
		for end < len(b) && (b[end] == '-' || (b[end] >= '0' && b[end] <= '9')) {
			end++
		}
	}
	if end > len(b) {
		return ID{}, false
	}
	var id ID
	if err := json.Unmarshal(b[:end], &id); err != nil || id.IsZero() {
		return ID{}, false
	}
	return id, true
}
