package transporttest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Checks of the transports.Conn contract every transport shares. Each
// takes a connection to a peer that sends back every frame it receives,
// and the Recorder given to the transport's Dial.

// SendsDoNotInterleave sends each frames from each of senders goroutines
// at once and checks that every frame comes back whole, exactly once.
// Sender g pads its frames with g×pad bytes, so that frames of different
// sizes race and a torn write would show.
func SendsDoNotInterleave(t *testing.T, c transports.Conn, rec *Recorder, senders, each, pad int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				frame := fmt.Sprintf(`{"g":%d,"i":%d,"pad":"%s"}`, g, i, strings.Repeat("p", pad*g))
				assert.NoError(t, c.Send(testwait.Context(t), []byte(frame)))
			}
		})
	}
	testwait.Call(t, "every sender to finish", wg.Wait)
	frames, _ := rec.Wait(t, senders*each)
	seen := map[string]bool{}
	for _, f := range frames {
		var g, i int
		var padding string
		_, err := fmt.Sscanf(f, `{"g":%d,"i":%d,"pad":%q}`, &g, &i, &padding)
		require.NoError(t, err, "a frame that is not one of those sent: %.200s", f)
		require.Equal(t, strings.Repeat("p", pad*g), padding, "frame %d of sender %d is not whole", i, g)
		seen[f] = true
	}
	assert.Len(t, seen, senders*each, "every frame once")
}

// CloseIsSafeConcurrently closes c from several goroutines while others
// keep sending: every Send succeeds or fails with transports.ErrClosed,
// every Close returns nil, and the receiver is told of the end once.
func CloseIsSafeConcurrently(t *testing.T, c transports.Conn, rec *Recorder, sends int) {
	t.Helper()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range sends {
				if err := c.Send(testwait.Context(t), []byte(`{}`)); err != nil {
					assert.ErrorIs(t, err, transports.ErrClosed)
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() { assert.NoError(t, c.Close(testwait.Context(t))) })
	}
	testwait.Call(t, "the senders and closers to finish", wg.Wait)
	assert.NoError(t, c.Close(testwait.Context(t)), "Close is idempotent")
	rec.WaitClosed(t)
}
