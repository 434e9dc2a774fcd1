package sandboxtest_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

// The alloc tool, run past a data limit, ends the probe with the
// runtime's out-of-memory report every time: the report is how the
// supervisor tells a resource limit from a crash (the flake of
// TestSandboxProbes: with the collector on, a collection that ran out of
// memory midway crashed the runtime with a SIGSEGV instead, in about 7
// runs in 100).
func TestProbeRunsOutOfMemoryWithAReport(t *testing.T) {
	bin, err := sandboxtest.Build(t.TempDir())
	require.NoError(t, err)
	input := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + sandboxtest.ToolAlloc + `","arguments":{"mb":384}}}` + "\n"
	const runs = 50
	for i := range runs {
		// 128 MiB of data segment, as the sandbox tests' MemoryMB.
		cmd := exec.Command("sh", "-c", `ulimit -d 131072 && exec "$0"`, bin)
		cmd.Stdin = strings.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.WaitDelay = time.Second
		err := testwait.Result(t, fmt.Sprintf("run %d of the probe to end", i), cmd.Run)
		require.Error(t, err, "run %d: the probe must not survive allocating 384 MiB", i)
		// What the runtime prints when an allocation fails: two of the
		// phrases the supervisor looks for (transports/stdio's outOfMemory).
		if out := stderr.String(); !strings.Contains(out, "out of memory") && !strings.Contains(out, "cannot allocate memory") {
			t.Fatalf("run %d of %d: no out-of-memory report in the probe's stderr:\n%s", i, runs, head(stderr.String(), 40))
		}
	}
}

// head returns the first n lines of s.
func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}
