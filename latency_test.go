package mcpvisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLatencyHistogram(t *testing.T) {
	var h latencyHist
	assert.Zero(t, h.stats().P50, "no requests, no percentile")
	for range 98 {
		h.observe(80*time.Microsecond, false) // bucket ≤100 µs
	}
	h.observe(3*time.Millisecond, true) // ≤5 ms
	h.observe(2*time.Minute, true)      // overflow
	st := h.stats()
	assert.Equal(t, uint64(100), st.Calls)
	assert.Equal(t, uint64(2), st.Errors)
	assert.Equal(t, 100*time.Microsecond, st.P50)
	assert.Equal(t, 5*time.Millisecond, st.P99)
	assert.Equal(t, uint64(1), st.Counts[len(LatencyBuckets)], "the overflow bucket")
	assert.Equal(t, 98*80*time.Microsecond+3*time.Millisecond+2*time.Minute, st.Sum)
}
