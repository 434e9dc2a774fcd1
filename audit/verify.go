package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrBroken is wrapped by every error Verify returns for a trail whose
// chain breaks; the more precise sentinels below wrap it too.
var ErrBroken = errors.New("audit: the trail's chain is broken")

// The ways a chain breaks (each wraps ErrBroken).
var (
	// ErrHashMismatch: a line's prev is not the hash of the line before
	// it: that line (or this one's prev) was edited, or lines were
	// reordered or replaced.
	ErrHashMismatch = fmt.Errorf("%w: prev does not match the previous line", ErrBroken)
	// ErrSeqGap: a line's seq skips numbers: lines were removed (or
	// moved further down).
	ErrSeqGap = fmt.Errorf("%w: lines are missing or out of order", ErrBroken)
	// ErrSeqOrder: a line's seq is not above the previous one's: lines
	// were reordered or repeated.
	ErrSeqOrder = fmt.Errorf("%w: lines are out of order", ErrBroken)
	// ErrTruncated: the file ends in a partial line (cut off).
	ErrTruncated = fmt.Errorf("%w: the file ends in a partial line", ErrBroken)
	// ErrBadLine: a line is not a trail line (DecodeLine failed).
	ErrBadLine = fmt.Errorf("%w: not a trail line", ErrBroken)
	// ErrNotGenesis: the trail's first line is seq 1 but does not chain
	// to Genesis.
	ErrNotGenesis = fmt.Errorf("%w: the first line does not chain to genesis", ErrBroken)
)

// BreakError is the error of a broken chain: where it breaks. It wraps
// one of the sentinels above.
type BreakError struct {
	// File and Line (from 1) are the line that breaks the chain.
	File string
	Line int
	// Seq is that line's seq (0 when it does not decode).
	Seq uint64
	// Detail says what was found.
	Detail string
	err    error
}

func (e *BreakError) Error() string {
	return fmt.Sprintf("%s:%d: %v: %s", e.File, e.Line, e.err, e.Detail)
}

func (e *BreakError) Unwrap() error { return e.err }

// Report is what Verify found in an intact trail.
type Report struct {
	// Files and Lines are how many were read.
	Files, Lines int
	// FirstSeq and LastSeq are the seq of the first and last line.
	FirstSeq, LastSeq uint64
	// FromGenesis is true when the first line is seq 1, chained to
	// Genesis; false when the first file given goes on from a file not
	// given (rotated away).
	FromGenesis bool
	// LastHash is the hash of the last line: what the next line will
	// chain to. Kept elsewhere, it detects lines later removed from the
	// end of the trail, which the chain alone cannot.
	LastHash string
}

// Verify reads the trail files given, oldest first (Path.N … Path.1,
// Path), and checks the chain: every line decodes, its seq is the one
// before plus 1, its prev is the SHA-256 of the line before (across
// files: the last line of the file before), the trail's seq-1 line
// chains to Genesis, and no file ends in a partial line. The first file
// may start further on (its older files rotated away; Report.FromGenesis
// says). It returns the first break as a *BreakError (wrapping
// ErrBroken), or an error of its own when a file cannot be read.
func Verify(files ...string) (Report, error) {
	var rep Report
	if len(files) == 0 {
		return rep, errors.New("audit: no files to verify")
	}
	var prev string // hash of the previous line; "" before the first
	var seq uint64
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return rep, fmt.Errorf("audit: %w", err)
		}
		err = verifyFile(f, name, &rep, &prev, &seq)
		f.Close()
		if err != nil {
			return rep, err
		}
		rep.Files++
	}
	rep.LastSeq, rep.LastHash = seq, prev
	return rep, nil
}

func verifyFile(r io.Reader, name string, rep *Report, prev *string, seq *uint64) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		b, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		brk := func(sentinel error, s uint64, format string, args ...any) error {
			return &BreakError{File: name, Line: n, Seq: s, Detail: fmt.Sprintf(format, args...), err: sentinel}
		}
		if errors.Is(err, errPartial) {
			return brk(ErrTruncated, 0, "%d bytes without a newline at the end", len(b))
		}
		if err != nil {
			return fmt.Errorf("audit: %s: %w", name, err)
		}
		l, derr := DecodeLine(b)
		if derr != nil {
			return brk(ErrBadLine, 0, "%v", derr)
		}
		switch {
		case *prev == "" && l.Seq == 1 && l.Prev != Genesis:
			return brk(ErrNotGenesis, l.Seq, "prev %s", l.Prev)
		case *prev == "":
			rep.FirstSeq, rep.FromGenesis = l.Seq, l.Seq == 1
		case l.Seq > *seq+1:
			return brk(ErrSeqGap, l.Seq, "seq %d follows seq %d: %d line(s) removed or moved from before it", l.Seq, *seq, l.Seq-*seq-1)
		case l.Seq <= *seq:
			return brk(ErrSeqOrder, l.Seq, "seq %d follows seq %d", l.Seq, *seq)
		case l.Prev != *prev:
			return brk(ErrHashMismatch, l.Seq, "the line before it (seq %d) was changed, or this line's prev was", *seq)
		}
		*prev, *seq = lineHash(b), l.Seq
		rep.Lines++
	}
}

// errPartial: the reader ended in the middle of a line.
var errPartial = errors.New("partial line")

// readLine returns the next line without its newline; io.EOF at the
// end; errPartial (with the bytes) for a last line without a newline.
// A line longer than MaxLineSize is returned cut, to fail decoding.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) <= MaxLineSize+1 {
			line = append(line, chunk...)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(line) == 0 {
				return nil, io.EOF
			}
			return line, errPartial
		default:
			return nil, err
		}
	}
}
