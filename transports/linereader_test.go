package transports_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// readAll collects the pieces ReadSlice returns until an error other
// than bufio.ErrBufferFull.
func readAll(t *testing.T, next func() ([]byte, error)) (pieces []string, err error) {
	t.Helper()
	for {
		b, err := next()
		if len(b) > 0 {
			pieces = append(pieces, string(b))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return pieces, err
		}
	}
}

// LineReader splits a pipe's bytes exactly as bufio.Reader.ReadSlice
// splits the same bytes, however the writer chunks them: lines, pieces
// of lines longer than the buffer, and the unterminated tail at EOF.
func TestLineReaderMatchesBufioOverAPipe(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var stream bytes.Buffer
		for range rng.IntN(40) {
			stream.WriteString(strings.Repeat("x", rng.IntN(200)))
			stream.WriteByte('\n')
		}
		stream.WriteString(strings.Repeat("t", rng.IntN(3)*50)) // maybe a tail
		br := bufio.NewReaderSize(bytes.NewReader(stream.Bytes()), 64)
		want, wantErr := readAll(t, func() ([]byte, error) { return br.ReadSlice('\n') })
		require.ErrorIs(t, wantErr, io.EOF)

		r, w, err := os.Pipe()
		require.NoError(t, err)
		go func(b []byte) {
			defer w.Close()
			for len(b) > 0 {
				n := min(len(b), 1+rng.IntN(100))
				w.Write(b[:n])
				b = b[n:]
			}
		}(bytes.Clone(stream.Bytes()))
		lr := transports.NewLineReader(r, 64)
		var got []string
		var gotErr error
		testwait.Call(t, "the line reader to read the pipe to its end", func() { got, gotErr = readAll(t, lr.ReadSlice) })
		lr.Close()
		r.Close()
		require.ErrorIs(t, gotErr, io.EOF, "round %d", round)
		assert.Equal(t, strings.Join(want, ""), strings.Join(got, ""), "round %d: the bytes", round)
		for _, p := range got {
			assert.LessOrEqual(t, len(p), 64, "round %d: a piece is at most the buffer", round)
		}
	}
}

// Over a source without a RawConn (an io.Pipe), LineReader reads like
// bufio: lines, then the tail with the source's error.
func TestLineReaderOverABlockingSource(t *testing.T) {
	lr := transports.NewLineReader(strings.NewReader("a\nbb\ntail"), 16)
	got, err := readAll(t, lr.ReadSlice)
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, []string{"a\n", "bb\n", "tail"}, got)
}
