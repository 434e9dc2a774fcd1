package protocol

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// The scans of string contents, eight bytes at a time: most of a large
// frame is the inside of a string, and byte-at-a-time loops over it were
// a third of a client's CPU time for a 1 MiB tools/call answer.

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

// shortRun is how far the scans go word by word before they hand a long
// string to bytes.IndexByte, which uses the CPU's vector instructions:
// word by word costs least for the short strings (keys, names, ids) that
// make up most small frames, IndexByte for the long texts of large ones.
const shortRun = 16

// plainEnd returns the index of the first byte at or after j that ends a
// run of plain string bytes ('"', '\\' or a control byte < 0x20), or
// len(data). It reads eight bytes at a time: loaded little-endian, the
// word's lowest set bit is the first byte in memory order.
func plainEnd(data []byte, j int) int {
	for n := 0; n < shortRun/8 && len(data)-j >= 8; n++ {
		w := binary.LittleEndian.Uint64(data[j:])
		// w - 0x20 in each byte borrows (sets the top bit) only for bytes
		// below 0x20, with the same lowest-bit guarantee as swarZero.
		stop := swarZero(w^(swarOnes*'"')) | swarZero(w^(swarOnes*'\\')) | (w-swarOnes*0x20)&^w&swarTops
		if stop != 0 {
			return j + bits.TrailingZeros64(stop)/8
		}
		j += 8
	}
	if len(data)-j >= 8 {
		// A long string: the first quote or backslash, then the first
		// control byte before it.
		run := data[j:]
		if q := bytes.IndexByte(run, '"'); q >= 0 {
			run = run[:q]
		}
		if b := bytes.IndexByte(run, '\\'); b >= 0 {
			run = run[:b]
		}
		return j + controlEnd(run)
	}
	for ; j < len(data); j++ {
		if c := data[j]; c == '"' || c == '\\' || c < 0x20 {
			return j
		}
	}
	return j
}

// controlEnd returns the index of the first byte < 0x20 in s, or len(s).
func controlEnd(s []byte) int {
	j := 0
	for ; len(s)-j >= 16; j += 16 {
		w0 := binary.LittleEndian.Uint64(s[j:])
		w1 := binary.LittleEndian.Uint64(s[j+8:])
		if ((w0-swarOnes*0x20)&^w0|(w1-swarOnes*0x20)&^w1)&swarTops != 0 {
			break // the exact byte is found below
		}
	}
	for ; j < len(s); j++ {
		if s[j] < 0x20 {
			return j
		}
	}
	return j
}

// quoteOrEscape returns the index of the first '"' or '\\' at or after j
// (or len(data)), and whether a byte ≥ 0x80 comes before it.
func quoteOrEscape(data []byte, j int) (int, bool) {
	var seen uint64 // the bytes before the stop, or'ed together
	for n := 0; n < shortRun/8 && len(data)-j >= 8; n++ {
		w := binary.LittleEndian.Uint64(data[j:])
		if stop := swarZero(w^(swarOnes*'"')) | swarZero(w^(swarOnes*'\\')); stop != 0 {
			n := bits.TrailingZeros64(stop) // the stop byte's top bit: 8k+7
			seen |= w & (1<<(n-7) - 1)      // the k bytes before it
			return j + n/8, seen&swarTops != 0
		}
		seen |= w
		j += 8
	}
	if len(data)-j >= 8 {
		run := data[j:]
		if q := bytes.IndexByte(run, '"'); q >= 0 {
			run = run[:q]
		}
		if b := bytes.IndexByte(run, '\\'); b >= 0 {
			run = run[:b]
		}
		return j + len(run), seen&swarTops != 0 || hasHigh(run)
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

// hasHigh reports whether s has a byte ≥ 0x80.
func hasHigh(s []byte) bool {
	var seen uint64
	j := 0
	for ; len(s)-j >= 32; j += 32 {
		seen |= binary.LittleEndian.Uint64(s[j:]) | binary.LittleEndian.Uint64(s[j+8:]) |
			binary.LittleEndian.Uint64(s[j+16:]) | binary.LittleEndian.Uint64(s[j+24:])
		if seen&swarTops != 0 {
			return true
		}
	}
	for ; j < len(s); j++ {
		seen |= uint64(s[j])
	}
	return seen&swarTops != 0
}

// asciiEnd returns the index of the first '\\' or byte ≥ 0x80 at or
// after j in s, or len(s).
func asciiEnd(s []byte, j int) int {
	for ; len(s)-j >= 8; j += 8 {
		w := binary.LittleEndian.Uint64(s[j:])
		if stop := swarZero(w^(swarOnes*'\\')) | w&swarTops; stop != 0 {
			return j + bits.TrailingZeros64(stop)/8
		}
	}
	for ; j < len(s); j++ {
		if c := s[j]; c == '\\' || c >= 0x80 {
			return j
		}
	}
	return j
}
