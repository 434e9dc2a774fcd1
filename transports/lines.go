package transports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// Newline-delimited framing, as stdio servers (and in-process servers
// speaking their protocol) write it.
const (
	// lineReadBuffer is the read buffer: most frames fit it, and are
	// delivered from it without a copy. It is borrowed from a pool only
	// while bytes are pending (see LineReader), so an idle connection
	// holds none.
	lineReadBuffer = 64 << 10
	// framePrefixSize is how much of an oversize frame its error keeps.
	framePrefixSize = 4 << 10
	// retainedLineBuffer bounds the assembly buffer kept between frames,
	// so that one huge frame does not pin its memory.
	retainedLineBuffer = 1 << 20
)

// ReadLines delivers the newline-delimited frames of r to recv until r
// ends, and returns the error that ended it (io.EOF at a clean end). It
// does not call recv.Closed: the caller knows why the stream ended.
//
// A trailing CR is dropped and blank lines are skipped. A frame over
// limit bytes is discarded and reported through recv.FrameError as a
// *FrameTooLargeError with the frame's first bytes; reading goes on. A
// last frame without its newline is delivered if it is valid JSON, and
// dropped otherwise: it is a write cut short by the writer's death, and
// the end of the stream says more than a malformed frame would.
func ReadLines(r io.Reader, limit int64, recv Receiver) error {
	br := NewLineReader(r, lineReadBuffer)
	defer br.Close()
	var long []byte    // a frame longer than the read buffer, being assembled
	var dropping int64 // >0: bytes of an oversize frame discarded so far
	var prefix []byte  // the start of the oversize frame
	tooLarge := func() {
		recv.FrameError(&FrameTooLargeError{Size: dropping, Limit: limit, Prefix: prefix})
		dropping, prefix = 0, nil
	}
	for {
		chunk, err := br.ReadSlice()
		complete := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if complete {
			chunk = chunk[:len(chunk)-1]
		}
		switch {
		case dropping > 0:
			dropping += int64(len(chunk))
		case int64(len(long)+len(chunk)) > limit:
			dropping = int64(len(long) + len(chunk))
			prefix = append(make([]byte, 0, framePrefixSize), long[:min(len(long), framePrefixSize)]...)
			prefix = append(prefix, chunk[:min(len(chunk), framePrefixSize-len(prefix))]...)
			long = long[:0]
		case complete && len(long) == 0:
			deliverLine(recv, chunk) // the common case: no copy
		default:
			long = append(long, chunk...)
			if complete {
				deliverLine(recv, long)
				long = long[:0]
			}
		}
		if complete {
			if cap(long) > retainedLineBuffer {
				long = nil
			}
			if dropping > 0 {
				tooLarge()
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			switch {
			case dropping > 0: // an oversize last line without its newline
				tooLarge()
			case len(long) > 0 && json.Valid(long): // a last frame without its newline
				deliverLine(recv, long)
			}
			return err
		}
	}
}

func deliverLine(recv Receiver, frame []byte) {
	frame = bytes.TrimRight(frame, "\r")
	if len(bytes.TrimSpace(frame)) == 0 {
		return
	}
	recv.Frame(frame)
}
