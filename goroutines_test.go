package mcpvisor

import (
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The supervisor's long-lived goroutines are named (routine.Go / Run): a
// goroutine profile says which is the liveness watcher and which reads
// a server's stdout, so a dump of a stuck host can be read.
func TestLongLivedGoroutinesAreNamed(t *testing.T) {
	s := start(t, testOptions)
	setAndSettle(t, s, map[string]ServerConfig{"named": plain()})
	var b strings.Builder
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	prof := b.String()
	for _, name := range []string{"supervisor.liveness", "stdio.read", "stdio.stderr"} {
		assert.Contains(t, prof, `"mcpvisor":"`+name+`"`, "a goroutine named %s", name)
	}
}
