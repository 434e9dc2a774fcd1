package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/mgmtscript"
	"github.com/mcpvisor/mcpvisor/management"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// moduleRoot is the repository's root, from this package's directory.
const moduleRoot = ".."

// The management tools through the gateway (as `supervise
// --management-tools` offers them): a host connected to the gateway, in
// the stateless era and in a handshake one, sees the definitions and gets
// the outputs that the library's TestManagementToolAnswers pins, from the
// same golden files.
func TestGatewayManagementTools(t *testing.T) {
	for _, version := range []string{"", protocol.Version20250618} {
		name := version
		if name == "" {
			name = "negotiated"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var managed atomic.Pointer[mcpvisor.Supervisor]
			sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop(), Builtins: management.Tools(managed.Load)})
			require.NoError(t, err)
			managed.Store(sup)
			t.Cleanup(func() {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				assert.NoError(t, sup.Close(cctx))
			})
			_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
				"m":    {Config: mockserver.Command("-subscribe", "-resources", "2"), ProtocolVersion: "2025-11-25"},
				"lazy": {Config: mockserver.Command(), Lazy: true},
			}, mcpvisor.AwaitSettled(30*time.Second))
			require.NoError(t, err)
			_, srv := serve(t, sup, gateway.Options{})
			// Trusted, so that the host keeps the tools' annotations.
			host := upstream(t, map[string]mcpvisor.ServerConfig{
				"gw": {Config: transports.Config{Type: "http", URL: srv.URL + gateway.MCPPath}, ProtocolVersion: version, Trust: "trusted"},
			})

			byName := map[string]protocol.Tool{}
			for _, tool := range host.Tools() {
				byName[tool.Name] = tool.Definition
			}
			var defs []protocol.Tool
			for _, d := range management.Definitions() {
				got, ok := byName["mcp__gw__"+d.Name]
				require.True(t, ok, "the gateway offers %s", d.Name)
				defs = append(defs, got)
			}
			rendered, err := mgmtscript.Render(defs)
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(moduleRoot, mgmtscript.Dir, "definitions.golden.json"))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(rendered), "the definitions as the gateway's client sees them")

			steps, err := mgmtscript.Load(moduleRoot)
			require.NoError(t, err)
			var answers []mgmtscript.Answer
			for _, step := range steps {
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				res, err := host.CallTool(cctx, "mcp__gw__"+step.Tool, step.Args)
				cancel()
				require.NoError(t, err, step.Tool)
				a, err := mgmtscript.Record(step, res)
				require.NoError(t, err)
				answers = append(answers, a)
			}
			got, err := mgmtscript.Render(answers)
			require.NoError(t, err)
			want, err = os.ReadFile(filepath.Join(moduleRoot, mgmtscript.Dir, "answers.golden.json"))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "the outputs as the gateway's client sees them")
		})
	}
}
