package session_test

import (
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/internal/transcript"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio"
)

var update = flag.Bool("update", false, "rewrite the transcripts of testdata/transcripts from this run")

// wireScenario is one transcript: a session opened against the mock
// server (over stdio, started with args), then driven by run.
type wireScenario struct {
	file    string   // under testdata/transcripts
	what    string   // the transcript's comment: what it pins
	version string   // session.Options.ProtocolVersion ("" negotiates)
	args    []string // the mock server's flags
	run     func(t *testing.T, ctx context.Context, s *session.Session, rec *transcript.Recorder)
}

// listAndCall lists the tools and calls echo.
func listAndCall(t *testing.T, ctx context.Context, s *session.Session, _ *transcript.Recorder) {
	_, err := s.Lists().Tools(ctx)
	require.NoError(t, err)
	res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hello"}`), nil)
	require.NoError(t, err)
	require.False(t, res.IsError)
}

// The JSON-RPC frames mcpvisor's session exchanges with a real server
// (the project's mock, as a process on stdio) in each protocol era, pinned
// frame by frame by testdata/transcripts/*.txtar. What varies between
// runs is normalized by transcript.Normalize; run with -update to
// rewrite the files after an intended change of the wire.
func TestWireTranscripts(t *testing.T) {
	scenarios := []wireScenario{
		{
			file:    "2024-11-05-tools.txtar",
			what:    "A session pinned to 2024-11-05: initialize, initialized, tools/list, tools/call.",
			version: protocol.Version20241105, args: []string{"-versions", "2024-11-05"},
			run: listAndCall,
		},
		{
			file:    "2025-03-26-tools.txtar",
			what:    "A session pinned to 2025-03-26: initialize, initialized, tools/list, tools/call.",
			version: protocol.Version20250326, args: []string{"-versions", "2025-03-26"},
			run: listAndCall,
		},
		{
			file:    "2025-06-18-tools.txtar",
			what:    "A session pinned to 2025-06-18: initialize, initialized, tools/list, tools/call.",
			version: protocol.Version20250618, args: []string{"-versions", "2025-06-18"},
			run: listAndCall,
		},
		{
			file:    "2025-11-25-tools.txtar",
			what:    "A session pinned to 2025-11-25: initialize, initialized, tools/list, tools/call.",
			version: protocol.Version20251125, args: []string{"-versions", "2025-11-25"},
			run: listAndCall,
		},
		{
			file: "negotiated-2024-11-05-fallback.txtar",
			what: "An unpinned session meets a server of 2024-11-05 only: the server/discover probe is refused,\n" +
				"initialize offers the newest handshake version and the server answers with its own.",
			args: []string{"-versions", "2024-11-05"},
			run:  func(*testing.T, context.Context, *session.Session, *transcript.Recorder) {},
		},
		{
			file: "2026-07-28-tools.txtar",
			what: "An unpinned session meets a server of every era: server/discover settles 2026-07-28 (no handshake),\n" +
				"then a stateless tools/list and tools/call, each carrying the protocol version, client info and\n" +
				"capabilities in _meta.",
			run: listAndCall,
		},
		{
			file: "2026-07-28-listen.txtar",
			what: "2026-07-28 subscriptions: subscriptions/listen for tool list changes, its acknowledgement, a\n" +
				"tool announced by a call, the list_changed notification tagged with the subscription id,\n" +
				"the stream cancelled (notifications/cancelled on stdio), then a ping (server/discover) that\n" +
				"orders the end of the transcript.",
			run: func(t *testing.T, ctx context.Context, s *session.Session, rec *transcript.Recorder) {
				l, err := s.Subscriptions().Open(ctx, protocol.NotificationSubscriptions{ToolsListChanged: true}, nil)
				require.NoError(t, err)
				testwait.Done(t, l.Acknowledged(), "the acknowledgement of subscriptions/listen")
				_, err = s.CallTool(ctx, "announce", json.RawMessage(`{"text":"late"}`), nil)
				require.NoError(t, err)
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, rec.Await(wctx, transcript.Server, protocol.NotificationToolsListChanged))
				l.Cancel()
				testwait.Done(t, l.Done(), "the end of the cancelled subscriptions/listen")
				require.NoError(t, rec.Await(wctx, transcript.Client, protocol.NotificationCancelled))
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
			rec := &transcript.Recorder{}
			dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				c, err := stdio.Dial(ctx, mockserver.Command(sc.args...), fastClose, rec.Receiver(r))
				if err != nil {
					return nil, err
				}
				return rec.Conn(c), nil
			}
			ctx, s := transcript.OpenSession(t, dial, sc.version)
			sc.run(t, ctx, s, rec)
			transcript.Check(t, filepath.Join(dir, sc.file), sc.what, rec.Frames(), *update)
		})
	}
}
