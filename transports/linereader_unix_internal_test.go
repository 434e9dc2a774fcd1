//go:build unix

package transports

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// countingPool is a buffer pool that counts what it lent and got back.
type countingPool struct {
	pool      sync.Pool
	gets, out atomic.Int64
}

func (p *countingPool) Get() any {
	p.gets.Add(1)
	p.out.Add(1)
	return p.pool.Get()
}

func (p *countingPool) Put(b any) {
	p.out.Add(-1)
	p.pool.Put(b)
}

// An idle pipe reader holds no buffer: it returns it to the pool before
// it parks, and borrows one again when bytes arrive; a reader waiting
// for the rest of a line keeps the bytes it has.
func TestLineReaderParksWithoutABuffer(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()

	pool := &countingPool{pool: sync.Pool{New: func() any { b := make([]byte, 1024); return &b }}}
	lr := NewLineReader(r, 1024)
	lr.pool = pool
	require.NotNil(t, lr.raw, "an *os.File pipe must be read through its RawConn")

	var line []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		line, err = lr.ReadSlice()
	}()
	// The reader found the pipe empty: it borrowed a buffer, read nothing,
	// gave it back, and waits in the poller with none.
	deadline := time.Now().Add(testwait.Patience)
	for pool.gets.Load() == 0 || pool.out.Load() != 0 {
		require.True(t, time.Now().Before(deadline), "within %v, the reader did not find the pipe empty and give its buffer back", testwait.Patience)
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, pool.out.Load(), "parked on an empty pipe with no buffer")
	w.Write([]byte("one\ntw"))
	testwait.Done(t, done, "the first line")
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(line))

	// "tw" waits for the rest of its line: the buffer holding it stays out.
	done = make(chan struct{})
	go func() {
		defer close(done)
		line, err = lr.ReadSlice()
	}()
	assert.EqualValues(t, 1, pool.out.Load(), "the buffer holding a partial line is kept")
	w.Write([]byte("o\n"))
	testwait.Done(t, done, "the second line")
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(line))
	assert.EqualValues(t, 1, pool.out.Load())
}
