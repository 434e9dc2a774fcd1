package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cluster member whose --cluster-addr is not loopback needs mutual TLS
// between members, as --listen beyond loopback needs a token: without
// the --cluster-tls-* flags supervise --cluster refuses at once (usage
// error, exit 2) and names the flags; the TLS flags go together, and a
// file that is not there or not PEM is a usage error naming it.
func TestClusterAddrBeyondLoopbackWithoutTLSIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, map[string]any{})
	ports := clusterFreePorts(t, 2)
	membership := []string{"--cluster-membership-port", strconv.Itoa(ports[1]), "--cluster-peers", "127.0.0.1:" + strconv.Itoa(ports[1])}
	supervise := func(addr string, flags ...string) result {
		args := append([]string{"supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--cluster", "--cluster-addr", addr}, membership...)
		return cli(t, append(args, flags...)...)
	}
	port := strconv.Itoa(ports[0])
	for _, addr := range []string{"0.0.0.0:" + port, ":" + port, "[::]:" + port, "192.0.2.1:" + port} {
		r := supervise(addr)
		require.Equal(t, exitUsage, r.code, "--cluster-addr %s without TLS: %s", addr, r.stderr)
		require.Contains(t, r.stderr, "is not a loopback address")
		require.Contains(t, r.stderr, "--cluster-tls-cert")
	}
	r := supervise("0.0.0.0:"+port, "--cluster-tls-cert", filepath.Join(dir, "member.pem"))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "go together")

	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, files := range [][3]string{{missing, notPEM, notPEM}, {notPEM, notPEM, notPEM}} {
		r := supervise("0.0.0.0:"+port, "--cluster-tls-cert", files[0], "--cluster-tls-key", files[1], "--cluster-tls-ca", files[2])
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "bad TLS configuration")
		require.NotContains(t, r.stderr, "not a certificate", "a file's content in the error")
	}
}
