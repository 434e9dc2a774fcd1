package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --token-store and the --etcd-* flags are offered (in --help, and
// accepted) only by the commands that open the OAuth token store or
// reach an etcd; the others reject them as unknown.
func TestStoreFlagsOnlyWhereUsed(t *testing.T) {
	storeFlags := []string{"--token-store", "--etcd-endpoint", "--etcd-prefix", "--etcd-ca", "--etcd-cert", "--etcd-key"}
	for _, c := range [][]string{{"supervise"}, {"list"}, {"call"}, {"auth"}, {"auth", "status"}, {"auth", "login"}, {"auth", "logout"}} {
		r := cli(t, append(c, "--help")...)
		require.Equal(t, 0, r.code, r.stderr)
		for _, f := range storeFlags {
			assert.Contains(t, r.stdout, f, "mcpvisor %s --help", strings.Join(c, " "))
		}
	}
	for _, c := range []string{"trust", "status", "mock", "conformance", "add", "remove", "get"} {
		r := cli(t, c, "--help")
		require.Equal(t, 0, r.code, r.stderr)
		for _, f := range storeFlags {
			assert.NotContains(t, r.stdout+r.stderr, f, "mcpvisor %s --help", c)
		}
	}
	r := cli(t, "trust", "--etcd-endpoint", "http://127.0.0.1:9")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "unknown flag: --etcd-endpoint")
}
