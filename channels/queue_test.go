package channels

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each server has its own bounded queue in an inbox: a server flooding
// past the bound loses its own oldest messages (counted, and reported on
// the next delivery of that server's messages), never another server's.
func TestInboxBoundsEachServerAlone(t *testing.T) {
	h := NewHub()
	in := h.Subscribe(100)
	h.Publish(Message{Server: "quiet", Content: "keep me"})
	for i := range 250 {
		h.Publish(Message{Server: "chatty", Content: strconv.Itoa(i)})
	}
	h.Publish(Message{Server: "quiet", Content: "me too"})

	assert.Equal(t, Stats{Received: 252, Dropped: 150, Queued: 102}, in.Stats())
	assert.Equal(t, []ServerStats{
		{Server: "chatty", Stats: Stats{Received: 250, Dropped: 150, Queued: 100}},
		{Server: "quiet", Stats: Stats{Received: 2, Queued: 2}},
	}, in.ServerStats())

	quiet, err := in.WaitN(t.Context(), FromServer("quiet"), 10)
	require.NoError(t, err)
	require.Len(t, quiet, 2)
	assert.Equal(t, "keep me", quiet[0].Content)
	assert.Equal(t, "me too", quiet[1].Content)
	assert.Zero(t, quiet[0].Dropped+quiet[1].Dropped, "nothing of quiet's was lost")

	chatty, err := in.WaitN(t.Context(), nil, 1000)
	require.NoError(t, err)
	require.Len(t, chatty, 100)
	assert.Equal(t, "150", chatty[0].Content, "the newest 100 survive, oldest first")
	assert.Equal(t, uint64(150), chatty[0].Dropped, "the loss is reported on the next delivery")
	assert.Zero(t, chatty[1].Dropped, "and only once")
	assert.Equal(t, "249", chatty[99].Content)

	// Later losses are reported again, counted from the last delivery.
	for i := range 103 {
		h.Publish(Message{Server: "chatty", Content: "again" + strconv.Itoa(i)})
	}
	m, err := in.Wait(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, "again3", m.Content)
	assert.Equal(t, uint64(3), m.Dropped)
	assert.Equal(t, uint64(153), in.Dropped())
}

// Below the bound nothing is lost, whatever the interleaving of servers;
// WaitN returns the queued messages across servers in publication order.
func TestInboxWaitNKeepsPublicationOrder(t *testing.T) {
	h := NewHub()
	in := h.Subscribe(0)
	var want []string
	for i := range 999 {
		server := []string{"a", "b", "c"}[i%3]
		content := server + strconv.Itoa(i)
		want = append(want, content)
		h.Publish(Message{Server: server, Content: content})
	}
	var got []string
	for len(got) < len(want) {
		ms, err := in.WaitN(t.Context(), nil, 64)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ms), 64)
		for _, m := range ms {
			assert.Zero(t, m.Dropped)
			got = append(got, m.Content)
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, Stats{Received: 999, Taken: 999}, in.Stats())
	assert.Empty(t, in.TakeN(nil, 10))
}

// A waiter blocked on an empty inbox gets the next message, and WaitN
// returns at once what is queued rather than waiting for n.
func TestInboxWaitNBlocksForTheFirstOnly(t *testing.T) {
	h := NewHub()
	in := h.Subscribe(0)
	got := make(chan []Message, 1)
	go func() {
		ms, err := in.WaitN(t.Context(), FromServer("s"), 5)
		assert.NoError(t, err)
		got <- ms
	}()
	h.Publish(Message{Server: "other", Content: "not for it"})
	h.Publish(Message{Server: "s", Content: "one"})
	select {
	case ms := <-got:
		require.Len(t, ms, 1)
		assert.Equal(t, "one", ms[0].Content)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitN did not return the message published while it waited")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := in.WaitN(ctx, FromServer("s"), 5)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	m, ok := in.TryTake(nil)
	require.True(t, ok)
	assert.Equal(t, "not for it", m.Content)
}

// The byte bound drops the oldest too; the newest message is kept even
// when it alone is over the bound.
func TestInboxByteBound(t *testing.T) {
	h := NewHub()
	in := h.Open(InboxOptions{MaxBytes: 100})
	for i := range 10 {
		h.Publish(Message{Server: "s", Content: strings.Repeat(strconv.Itoa(i), 30)})
	}
	st := in.Stats()
	assert.Equal(t, 3, st.Queued, "three of 30 bytes fit in 100")
	assert.Equal(t, uint64(7), st.Dropped)
	h.Publish(Message{Server: "s", Content: strings.Repeat("x", 500)})
	ms := in.TakeN(nil, 10)
	require.Len(t, ms, 1)
	assert.Len(t, ms[0].Content, 500)
	assert.Equal(t, uint64(10), ms[0].Dropped)
}

// An inbox opened with a filter keeps only what the filter takes; what it
// does not take is not counted as received or dropped.
func TestInboxFilterAtOpen(t *testing.T) {
	h := NewHub()
	in := h.Open(InboxOptions{Capacity: 2, Filter: FromServer("mine")})
	for i := range 5 {
		h.Publish(Message{Server: "mine", Content: strconv.Itoa(i)})
		h.Publish(Message{Server: "theirs", Content: strconv.Itoa(i)})
	}
	assert.Equal(t, Stats{Received: 5, Dropped: 3, Queued: 2}, in.Stats())
	ms := in.TakeN(nil, 10)
	require.Len(t, ms, 2)
	assert.Equal(t, "mine", ms[0].Server)
	assert.Equal(t, "3", ms[0].Content)
}
