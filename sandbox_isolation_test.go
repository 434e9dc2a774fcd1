//go:build linux

package mcpvisor_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

// peers are what a server without network must not reach: a UDP echo
// server on 127.0.0.1, a unix socket by path (in a directory the server
// can see: its write path) and an abstract unix socket, each answering a
// greeting.
type peers struct {
	udp, unixPath, unixAbstract string
}

// startPeers starts the peers; dir is where the socket by path goes.
func startPeers(t *testing.T, dir string) peers {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	greet := func(ln net.Listener) {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("hello from outside\n"))
				c.Close()
			}
		}()
	}
	p := peers{udp: pc.LocalAddr().String(), unixPath: filepath.Join(dir, "peer.sock"), unixAbstract: "@mcpvisor-test-" + randomHex(t)}
	ln, err := net.Listen("unix", p.unixPath)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(p.unixPath, 0o777))
	greet(ln)
	ln, err = net.Listen("unix", p.unixAbstract)
	require.NoError(t, err)
	greet(ln)
	return p
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// capSets parses the probe's caps answer: set name (CapEff…) → hex mask.
func capSets(text string) map[string]string {
	sets := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			sets[strings.TrimSuffix(f[0], ":")] = f[1]
		}
	}
	return sets
}

// probeIsolation checks what issue 36 found a confined server could do
// (as root above all): keep capabilities (and with them unmount what hides
// the home directory), open raw sockets, reach UDP, unix sockets by path
// and abstract ones, read another process's environment, signal outside
// its tree, share /dev/shm. Unconfined, the same probes succeed (raw
// sockets only as root), so each row can fail.
func probeIsolation(t *testing.T, sup *mcpvisor.Supervisor, confined bool, home string, p peers) {
	t.Helper()
	root := os.Getuid() == 0
	call := func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		text, failed, err := probeCall(t, sup, tool, args)
		require.NoError(t, err)
		return text, failed
	}

	// Capabilities: none in any set; as root the bounding set is empty
	// too (an unprivileged user may not change it; no_new_privs keeps it
	// from giving anything).
	text, failed := call(sandboxtest.ToolCaps, nil)
	require.False(t, failed, text)
	sets := capSets(text)
	if confined {
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
			assert.Equal(t, "0000000000000000", sets[set], "%s of a confined server:\n%s", set, text)
		}
		if root {
			assert.Equal(t, "0000000000000000", sets["CapBnd"], "the bounding set of a server confined by root:\n%s", text)
		}
		// With a capability (bwrap as root, before the fix) the server
		// unmounted the tmpfs that hides the home directory.
		text, failed = call(sandboxtest.ToolUnmount, map[string]any{"path": home})
		assert.True(t, failed, "a confined server must not unmount the home directory's cover: %s", text)
		text, failed = call(sandboxtest.ToolRead, map[string]any{"path": filepath.Join(home, "secret")})
		assert.True(t, failed, "the home directory stays hidden: %s", text)
	} else if root {
		assert.NotEqual(t, "0000000000000000", sets["CapEff"], "root's server unconfined keeps its capabilities")
	}

	// A raw socket.
	text, failed = call(sandboxtest.ToolRaw, nil)
	assert.Equal(t, confined || !root, failed, "a raw socket (confined: %v, root: %v): %s", confined, root, text)

	// UDP, a unix socket by path, an abstract unix socket.
	text, failed = call(sandboxtest.ToolUDP, map[string]any{"addr": p.udp})
	assert.Equal(t, confined, failed, "a UDP echo from 127.0.0.1 (confined: %v): %s", confined, text)
	text, failed = call(sandboxtest.ToolUnix, map[string]any{"addr": p.unixPath})
	assert.Equal(t, confined, failed, "a unix socket by path (confined: %v): %s", confined, text)
	if confined {
		assert.NotContains(t, text, "hello from outside")
	}
	text, failed = call(sandboxtest.ToolUnix, map[string]any{"addr": p.unixAbstract})
	assert.Equal(t, confined, failed, "an abstract unix socket (confined: %v): %s", confined, text)
	if confined {
		assert.NotContains(t, text, "hello from outside")
	}

	// Another process of the same user, outside the server's tree: this
	// test, which holds a marker in its environment.
	self := os.Getpid()
	text, failed = call(sandboxtest.ToolRead, map[string]any{"path": "/proc/" + strconv.Itoa(self) + "/environ"})
	if confined {
		// (Not printed: it is this test's whole environment.)
		assert.True(t, failed && !strings.Contains(text, "PATH="),
			"reading the environment of a process outside the sandbox must be denied (%d bytes read)", len(text))
	} else {
		assert.False(t, failed, text)
	}
	text, failed = call(sandboxtest.ToolSignal, map[string]any{"pid": self})
	assert.Equal(t, confined, failed, "a signal to a process outside (confined: %v): %s", confined, text)

	// /dev/shm: what the user's programs put there is not the server's,
	// and what the server puts there is not theirs.
	outside := filepath.Join("/dev/shm", "mcpvisor-test-"+randomHex(t))
	require.NoError(t, os.WriteFile(outside, []byte("shared memory of another program"), 0o644))
	t.Cleanup(func() { os.Remove(outside) })
	text, failed = call(sandboxtest.ToolRead, map[string]any{"path": outside})
	if confined {
		assert.True(t, failed, "/dev/shm of the user's other programs must not be readable: %s", text)
	} else {
		assert.False(t, failed, text)
	}
	mine := filepath.Join("/dev/shm", "mcpvisor-test-"+randomHex(t))
	t.Cleanup(func() { os.Remove(mine) })
	text, _ = call(sandboxtest.ToolWrite, map[string]any{"path": mine})
	_, err := os.Stat(mine)
	if confined {
		assert.True(t, errors.Is(err, os.ErrNotExist), "a confined server's /dev/shm is not the host's: %s", text)
	} else {
		assert.NoError(t, err)
	}
}
