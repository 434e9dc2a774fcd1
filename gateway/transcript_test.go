package gateway_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/internal/transcript"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
)

// gatewayScenario is one transcript of a client talking to the gateway
// over Streamable HTTP; behind the gateway runs one mock server, "a", on
// stdio.
type gatewayScenario struct {
	file    string // under testdata/transcripts
	what    string // the transcript's comment: what it pins
	version string // the client's session.Options.ProtocolVersion ("" negotiates)
	run     func(t *testing.T, ctx context.Context, sup *mcpvisor.Supervisor, s *session.Session, rec *transcript.Recorder)
}

// gatewayListAndCall lists the gateway's tools and calls the mock's echo
// through it.
func gatewayListAndCall(t *testing.T, ctx context.Context, _ *mcpvisor.Supervisor, s *session.Session, _ *transcript.Recorder) {
	_, err := s.Lists().Tools(ctx)
	require.NoError(t, err)
	res, err := s.CallTool(ctx, "mcp__a__echo", json.RawMessage(`{"text":"hello"}`), nil)
	require.NoError(t, err)
	require.False(t, res.IsError)
}

// What the gateway answers a client in each protocol era, frame by frame
// (the JSON-RPC bodies; HTTP headers are not part of a transcript),
// pinned by testdata/transcripts/gateway-*.txtar. What varies between
// runs is normalized by transcript.Normalize; run with -update to rewrite
// the files after an intended change of the wire.
func TestGatewayWireTranscripts(t *testing.T) {
	handshake := func(version string) gatewayScenario {
		return gatewayScenario{
			file:    "gateway-" + version + "-tools.txtar",
			what:    "A client pinned to " + version + ": initialize, initialized, tools/list (the pool under qualified names\nand the gateway's own tools), tools/call routed to the server behind the name.",
			version: version,
			run:     gatewayListAndCall,
		}
	}
	scenarios := []gatewayScenario{
		handshake(protocol.Version20241105),
		handshake(protocol.Version20250326),
		handshake(protocol.Version20250618),
		handshake(protocol.Version20251125),
		{
			file: "gateway-2026-07-28-tools.txtar",
			what: "An unpinned client: server/discover settles 2026-07-28, then a stateless tools/list and tools/call\n" +
				"routed to the server behind the name.",
			run: gatewayListAndCall,
		},
		{
			file: "gateway-2026-07-28-listen.txtar",
			what: "2026-07-28 subscriptions: subscriptions/listen for tool list changes and its acknowledgement; a tool\n" +
				"the server behind the gateway announces reaches the client as list_changed tagged with the\n" +
				"subscription id. Cancelling closes the stream (no frame over HTTP); a ping (server/discover) ends it.",
			run: func(t *testing.T, ctx context.Context, sup *mcpvisor.Supervisor, s *session.Session, rec *transcript.Recorder) {
				l, err := s.Subscriptions().Open(ctx, protocol.NotificationSubscriptions{ToolsListChanged: true}, nil)
				require.NoError(t, err)
				testwait.Done(t, l.Acknowledged(), "the acknowledgement of subscriptions/listen")
				// Behind the gateway, not on this client's wire.
				_, err = sup.CallTool(ctx, "mcp__a__announce", map[string]any{"text": "late"})
				require.NoError(t, err)
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, rec.Await(wctx, transcript.Server, protocol.NotificationToolsListChanged))
				l.Cancel()
				testwait.Done(t, l.Done(), "the end of the cancelled subscriptions/listen")
				require.NoError(t, s.Ping(ctx))
			},
		},
	}

	dir := filepath.Join("testdata", "transcripts")
	files := make([]string, len(scenarios))
	for i, sc := range scenarios {
		files[i] = sc.file
	}
	transcript.RequireScenarios(t, dir, files)

	for _, sc := range scenarios {
		t.Run(strings.TrimSuffix(sc.file, ".txtar"), func(t *testing.T) {
			sup := upstream(t, map[string]mcpvisor.ServerConfig{"a": {Config: mockserver.Command("-name", "a")}})
			_, srv := serve(t, sup, gateway.Options{})
			rec := &transcript.Recorder{}
			dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				c, err := streamable.Dial(ctx, transports.Config{Type: transports.TypeHTTP, URL: srv.URL + gateway.MCPPath}, streamable.Options{}, rec.Receiver(r))
				if err != nil {
					return nil, err
				}
				return rec.Conn(c), nil
			}
			ctx, s := transcript.OpenSession(t, dial, sc.version)
			sc.run(t, ctx, sup, s, rec)
			transcript.Check(t, filepath.Join(dir, sc.file), sc.what, rec.Frames(), *updateGolden)
		})
	}
}
