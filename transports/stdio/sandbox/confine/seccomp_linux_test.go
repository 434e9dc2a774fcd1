package confine

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The socket filter assembles (every jump forward and in range), ends
// every path in a return, and reaches bubblewrap as whole struct
// sock_filter records. Whether it stops what it should is shown by the
// sandbox probes (TestSandboxProbes).
func TestSocketFilterAssembles(t *testing.T) {
	prog, err := SocketFilter()
	require.NoError(t, err)
	require.NotEmpty(t, prog)
	for i, in := range prog {
		if in.Code&0x07 == unix.BPF_JMP {
			assert.Less(t, i+1+int(in.Jt), len(prog), "instruction %d jumps past the end", i)
			assert.Less(t, i+1+int(in.Jf), len(prog), "instruction %d jumps past the end", i)
		}
	}
	assert.Equal(t, uint16(unix.BPF_RET|unix.BPF_K), prog[len(prog)-1].Code, "the program ends in a return")
	b, err := SocketFilterBytes()
	require.NoError(t, err)
	assert.Equal(t, len(prog)*int(unsafe.Sizeof(unix.SockFilter{})), len(b))

	_, err = assemble([]insn{{code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, jt: "nowhere"}})
	assert.Error(t, err, "a jump to a missing label")
	_, err = assemble([]insn{{label: "back", code: unix.BPF_RET}, {code: unix.BPF_JMP | unix.BPF_JA, jt: "back"}})
	assert.Error(t, err, "a jump backwards")
}

// The exec stage writes its own descriptor of the filter into
// bubblewrap's --seccomp, and only before bwrap's "--".
func TestSetSeccompFD(t *testing.T) {
	argv := []string{"bwrap", "--unshare-net", "--seccomp", "3", "--ro-bind", "/", "/", "--", "server", "--seccomp", "9"}
	require.True(t, setSeccompFD(argv, 7))
	assert.Equal(t, "7", argv[3])
	assert.Equal(t, "9", argv[10], "the server's own arguments are left alone")
	assert.False(t, setSeccompFD([]string{"bwrap", "--", "server", "--seccomp", "3"}, 7))
}
