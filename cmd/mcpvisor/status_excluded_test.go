package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// A server that a managed policy excludes (Config.Excluded) is shown by
// `mcpvisor status` with the policy's reason, in the table and in
// --json; a reload that no longer excludes it drops it.
func TestStatusShowsExcludedServers(t *testing.T) {
	t.Parallel()
	sup, err := mcpvisor.Start(context.Background(), mcpvisor.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close(context.Background()) })
	gw := gateway.New(sup, gateway.Options{})
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		gw.Close()
		srv.Close()
	})
	reason := `managed: requireSandbox is "all": a stdio server must have an enabled "sandbox"`
	gw.SetExcluded(map[string]string{"unconfined": reason})

	r := cli(t, "status", "--url", srv.URL)
	require.Equal(t, 0, r.code, r.stderr)
	var row string
	for line := range strings.Lines(r.stdout) {
		if strings.HasPrefix(line, "unconfined ") {
			row = line
		}
	}
	require.NotEmpty(t, row, "a row for the excluded server in:\n%s", r.stdout)
	assert.Contains(t, row, " excluded ")
	assert.Contains(t, row, "[policy] "+reason)

	r = cli(t, "status", "--url", srv.URL, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rep gateway.StatusReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, []gateway.ExcludedReport{{Name: "unconfined", Reason: reason}}, rep.Excluded)

	gw.SetExcluded(nil)
	r = cli(t, "status", "--url", srv.URL, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, `"excluded"`, "no excluded servers: the member is absent")
}
