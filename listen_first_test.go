package mcpvisor

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
)

// methodCounter counts the requests a server reads, by method.
type methodCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *methodCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// tee passes r on, counting each line's method.
func (c *methodCounter) tee(r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Method != "" {
				c.mu.Lock()
				c.n[m.Method]++
				c.mu.Unlock()
			}
			if _, err := pw.Write(append(sc.Bytes(), '\n')); err != nil {
				break
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr
}

// TestAConnectListsOnceAfterTheListenStreamIsAcknowledged: a 2026-07-28
// server's connect opens the listen stream before listing and lists once
// it is acknowledged, so the acknowledgement needs no second listing
// (each list was taken twice per connect: three requests for nothing).
// A change after the connect still arrives on the stream.
// testwait:ok: it runs in a synctest bubble, whose synctest.Wait is on
// the fake clock.
func TestAConnectListsOnceAfterTheListenStreamIsAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		counter := &methodCounter{n: map[string]int{}}
		opts := testOptions
		opts.InProcess = map[string]inproc.Server{"m": inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
			mockserver.Run(ctx, mockserver.Options{Resources: 1, Prompts: 1}, counter.tee(r), w)
			return nil
		})}
		s, err := Start(context.Background(), opts)
		require.NoError(t, err)
		settleInBubble(t, s, map[string]ServerConfig{"m": inProcess()})
		synctest.Wait() // whatever the acknowledgement set off has run

		st := statusOf(s, "m")
		require.Equal(t, StateReady, st.State, st.LastError)
		require.Equal(t, protocol.Version20260728, st.ProtocolVersion)
		assert.Equal(t, 1, counter.count(protocol.MethodSubscriptionsListen), "one listen stream")
		for _, m := range []string{protocol.MethodToolsList, protocol.MethodPromptsList, protocol.MethodResourcesList} {
			assert.Equal(t, 1, counter.count(m), "%s requests: the connect's only", m)
		}

		_, err = call(t, s, "mcp__m__announce", "late")
		require.NoError(t, err)
		synctest.Wait()
		assert.True(t, hasTool(s, "mcp__m__late"), "a change after the connect comes on the stream it opened")
		assert.Equal(t, 2, counter.count(protocol.MethodToolsList), "the change's listing")

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		time.Sleep(time.Second) // protoactor's dead-letter throttle, on the fake clock
	})
}
