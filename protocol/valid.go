package protocol

import (
	"encoding/binary"
	"math/bits"
)

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
			return false
		}
		switch c := data[i]; c {
		case '{', '[':
			if depth == maxNestingDepth {
				return false
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
				if i = objectKey(data, i); i < 0 {
					return false
				}
			}
			continue value
		case '"':
			if i = validStringEnd(data, i); i < 0 {
				return false
			}
		case 't':
			if !hasLiteral(data, i, "true") {
				return false
			}
			i += len("true")
		case 'f':
			if !hasLiteral(data, i, "false") {
				return false
			}
			i += len("false")
		case 'n':
			if !hasLiteral(data, i, "null") {
				return false
			}
			i += len("null")
		default:
			if i = numberEnd(data, i); i < 0 {
				return false
			}
		}
		// After a value, or at the closing bracket of an empty container:
		// close containers until a comma asks for the next value.
		for {
			i = skipSpace(data, i)
			if depth == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := depth - 1
			inObject := nest[top/64]>>(top%64)&1 == 1
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
				if inObject {
					if i = objectKey(data, i); i < 0 {
						return false
					}
				}
				continue value
			case '}':
				if !inObject {
					return false
				}
			case ']':
				if inObject {
					return false
				}
			default:
				return false
			}
			depth--
			i++
		}
	}
}

// objectKey checks the member name and colon starting at data[i] and
// returns the index of the member's value (after any space), or -1.
func objectKey(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = validStringEnd(data, i); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
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

// SWAR ("SIMD within a register") constants: a byte repeated in each of
// the eight bytes of a word, and each byte's top bit.
const (
	swarOnes = 0x0101010101010101
	swarTops = 0x8080808080808080
)

// swarZero returns, for each byte of w, its top bit set if the byte is
// zero. Bytes above the first zero byte may be flagged wrongly (a borrow
// runs into them), but no byte below it is, so the lowest set bit always
// marks the first zero byte, which is all the callers use.
func swarZero(w uint64) uint64 { return (w - swarOnes) &^ w & swarTops }

// plainEnd returns the index of the first byte at or after j that ends a
// run of plain string bytes ('"', '\\' or a control byte < 0x20), or
// len(data). It reads eight bytes at a time: loaded little-endian, the
// word's lowest set bit is the first byte in memory order.
func plainEnd(data []byte, j int) int {
	for ; len(data)-j >= 8; j += 8 {
		w := binary.LittleEndian.Uint64(data[j:])
		// w - 0x20 in each byte borrows (sets the top bit) only for bytes
		// below 0x20, with the same lowest-bit guarantee as swarZero.
		stop := swarZero(w^(swarOnes*'"')) | swarZero(w^(swarOnes*'\\')) | (w-swarOnes*0x20)&^w&swarTops
		if stop != 0 {
			return j + bits.TrailingZeros64(stop)/8
		}
	}
	for ; j < len(data); j++ {
		if c := data[j]; c == '"' || c == '\\' || c < 0x20 {
			return j
		}
	}
	return j
}

// quoteOrEscape returns the index of the first '"' or '\\' at or after j
// (or len(data)), and whether a byte ≥ 0x80 comes before it.
func quoteOrEscape(data []byte, j int) (int, bool) {
	var seen uint64 // the bytes before the stop, or'ed together
	for ; len(data)-j >= 8; j += 8 {
		w := binary.LittleEndian.Uint64(data[j:])
		if stop := swarZero(w^(swarOnes*'"')) | swarZero(w^(swarOnes*'\\')); stop != 0 {
			n := bits.TrailingZeros64(stop) // the stop byte's top bit: 8k+7
			seen |= w & (1<<(n-7) - 1)      // the k bytes before it
			return j + n/8, seen&swarTops != 0
		}
		seen |= w
	}
	high := seen&swarTops != 0
	for ; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"' || c == '\\':
			return j, high
		case c >= 0x80:
			high = true
		}
	}
	return j, high
}
