package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Outside a source tree, bench says what it needs. (Inside one it builds
// and runs bench/peers/cmd/bench, whose own test covers the runner.)
func TestBenchNeedsTheSourceTree(t *testing.T) {
	t.Parallel()
	r := cliIn(t, t.TempDir(), nil, "bench", "-quick")
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stderr, "source tree (bench/peers)")
}
