package protocol

// maxNestingDepth is encoding/json's limit on nested arrays and objects:
// its Valid rejects deeper input, so validJSON does too.
const maxNestingDepth = 10000

// validJSON reports whether data is exactly one JSON value, with optional
// whitespace around it. It accepts exactly what encoding/json.Valid
// accepts (FuzzValidJSON checks that): the RFC 8259 grammar, at most
// maxNestingDepth levels of nesting, strings without raw control bytes
// (< 0x20) and with any bytes ≥ 0x80, valid UTF-8 or not.
//
// Why not json.Valid: its scanner takes a function call per byte, which
// made it a third of a client's CPU time for a 1 MiB tools/call answer.
// This one walks string contents eight bytes at a time (most of a large
// frame is the inside of strings) and keeps the nesting on a bit stack, so
// hostile input costs time linear in its length and no recursion.
func validJSON(data []byte) bool {
	_, ok := validate(data, nil)
	return ok
}

// memberSpan locates one member of a top-level object in a frame.
type memberSpan struct {
	key, keyEnd int // the key, quotes included
	value, end  int // the value
}

// validate is validJSON that also, when spans is not nil, appends to
// spans where each member of a top-level object is, so that Decode reads
// the envelope without scanning the frame a second time.
func validate(data []byte, spans []memberSpan) ([]memberSpan, bool) {
	record := spans != nil
	open := false // a recorded member awaits the end of its value
	// nest holds one bit per open container, 1 for an object; the first
	// 128 levels need no allocation.
	var inline [2]uint64
	nest := inline[:]
	depth := 0
	i := skipSpace(data, 0)
value:
	for {
		// A value starts at data[i].
		if i >= len(data) {
			return spans, false
		}
		switch c := data[i]; c {
		case '{', '[':
			if depth == maxNestingDepth {
				return spans, false
			}
			if depth/64 == len(nest) {
				nest = append(nest, 0)
			}
			if bit := uint64(1) << (depth % 64); c == '{' {
				nest[depth/64] |= bit
			} else {
				nest[depth/64] &^= bit
			}
			depth++
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' or ']': empty
				break
			}
			if c == '{' {
				key := i
				keyEnd, v := objectKey(data, i)
				if v < 0 {
					return spans, false
				}
				if record && depth == 1 {
					spans = append(spans, memberSpan{key: key, keyEnd: keyEnd, value: v})
					open = true
				}
				i = v
			}
			continue value
		case '"':
			if i = validStringEnd(data, i); i < 0 {
				return spans, false
			}
		case 't':
			if !hasLiteral(data, i, "true") {
				return spans, false
			}
			i += len("true")
		case 'f':
			if !hasLiteral(data, i, "false") {
				return spans, false
			}
			i += len("false")
		case 'n':
			if !hasLiteral(data, i, "null") {
				return spans, false
			}
			i += len("null")
		default:
			if i = numberEnd(data, i); i < 0 {
				return spans, false
			}
		}
		// After a value, or at the closing bracket of an empty container:
		// close containers until a comma asks for the next value.
		for {
			if open && depth == 1 {
				spans[len(spans)-1].end = i
				open = false
			}
			i = skipSpace(data, i)
			if depth == 0 {
				return spans, i == len(data)
			}
			if i >= len(data) {
				return spans, false
			}
			top := depth - 1
			inObject := nest[top/64]>>(top%64)&1 == 1
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
				if inObject {
					key := i
					keyEnd, v := objectKey(data, i)
					if v < 0 {
						return spans, false
					}
					if record && depth == 1 {
						spans = append(spans, memberSpan{key: key, keyEnd: keyEnd, value: v})
						open = true
					}
					i = v
				}
				continue value
			case '}':
				if !inObject {
					return spans, false
				}
			case ']':
				if inObject {
					return spans, false
				}
			default:
				return spans, false
			}
			depth--
			i++
		}
	}
}

// objectKey checks the member name and colon starting at data[i] and
// returns the index just past the name and the index of the member's
// value (after any space); the value's index is -1 if they are invalid.
func objectKey(data []byte, i int) (keyEnd, value int) {
	if i >= len(data) || data[i] != '"' {
		return 0, -1
	}
	if keyEnd = validStringEnd(data, i); keyEnd < 0 {
		return 0, -1
	}
	i = skipSpace(data, keyEnd)
	if i >= len(data) || data[i] != ':' {
		return 0, -1
	}
	return keyEnd, skipSpace(data, i+1)
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// numberEnd returns the index just past the JSON number starting at
// data[i], or -1 if none starts there. What follows the number is the
// caller's to check.
func numberEnd(data []byte, i int) int {
	if data[i] == '-' {
		i++
		if i >= len(data) {
			return -1
		}
	}
	switch c := data[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i = digitsEnd(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := digitsEnd(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digitsEnd(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digitsEnd(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// validStringEnd checks the JSON string starting at data[i] (a quote) and
// returns the index just past it, or -1: unterminated, a raw control
// byte, or a malformed escape.
func validStringEnd(data []byte, i int) int {
	j := i + 1
	for {
		j = plainEnd(data, j)
		if j >= len(data) {
			return -1
		}
		switch data[j] {
		case '"':
			return j + 1
		case '\\':
			if j+1 >= len(data) {
				return -1
			}
			switch data[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if len(data)-j < 6 || !isHex(data[j+2]) || !isHex(data[j+3]) || !isHex(data[j+4]) || !isHex(data[j+5]) {
					return -1
				}
				j += 6
			default:
				return -1
			}
		default: // a control byte
			return -1
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
