package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// open opens Path for appending and takes up the chain of the trail it
// holds (New's goroutine, before run).
func (w *Writer) open() error {
	last, partial, err := lastLine(w.opts.Path)
	if err != nil {
		return err
	}
	if partial {
		// A line cut off (a crash mid-write): leave the file as it is,
		// for Verify to report, and go on in a new one chained to the
		// last whole line.
		w.opts.Logger.Warn().Str("path", w.opts.Path).Msg("audit trail ends in a partial line: rotating it out; verify will report it")
		if err := w.shift(); err != nil {
			return err
		}
	}
	if last == nil && !partial {
		// An empty (or no) file: the chain goes on from the newest
		// rotated one, if any.
		if last, _, err = lastLine(rotated(w.opts.Path, 1)); err != nil {
			return err
		}
	}
	if last != nil {
		l, err := DecodeLine(last)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadTrail, w.opts.Path, err)
		}
		w.seq, w.prev = l.Seq, lineHash(last)
	}
	f, err := os.OpenFile(w.opts.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	w.file, w.out, w.size = f, f, st.Size()
	return nil
}

// rotate closes the current file, shifts the rotated ones and opens a
// new Path (run's goroutine). The chain goes on: seq and prev are kept.
// On failure the writer goes on appending to what it has open.
func (w *Writer) rotate() {
	w.dirty = true
	w.sync()
	if err := w.file.Close(); err != nil {
		w.fail(err, "closing the trail to rotate it")
	}
	if err := w.shift(); err != nil {
		w.fail(err, "rotating the trail")
	}
	f, err := os.OpenFile(w.opts.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		w.fail(err, "opening the trail after rotation")
		// Keep writing somewhere rather than nowhere: the rotated file.
		if f, err = os.OpenFile(rotated(w.opts.Path, 1), os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			w.out = io.Discard
			w.file = nil
			return
		}
	}
	st, _ := f.Stat()
	w.file, w.out, w.size = f, f, 0
	if st != nil {
		w.size = st.Size()
	}
}

// shift renames Path.i to Path.i+1 (the oldest, Path.Keep, is replaced)
// and Path to Path.1.
func (w *Writer) shift() error {
	p := w.opts.Path
	for i := w.opts.Keep - 1; i >= 1; i-- {
		if err := os.Rename(rotated(p, i), rotated(p, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return os.Rename(p, rotated(p, 1))
}

// lastLine returns the last whole line of the file at path (without its
// newline), nil when it has none (or does not exist), and whether the
// file ends in a partial line (no newline at its end).
func lastLine(path string) (last []byte, partial bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("audit: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return nil, false, nil
	}
	// Read back from the end until the start of the last whole line.
	chunk := int64(64 << 10)
	var tail []byte
	for off := size; ; {
		n := min(chunk, off)
		off -= n
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("audit: %w", err)
		}
		tail = append(b, tail...)
		body := tail
		if off+int64(len(tail)) == size {
			partial = tail[len(tail)-1] != '\n'
		}
		if !partial {
			body = tail[:len(tail)-1]
		} else if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
			body = tail[:i]
		} else if off == 0 {
			return nil, true, nil
		} else {
			continue
		}
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			return body[i+1:], partial, nil
		}
		if off == 0 {
			if len(body) == 0 {
				return nil, partial, nil
			}
			return body, partial, nil
		}
		if int64(len(tail)) > MaxLineSize+chunk {
			return nil, false, fmt.Errorf("%w: %s: a line longer than %d bytes", ErrBadTrail, path, MaxLineSize)
		}
	}
}
