package testserver_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/testserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	testserver.Main()
	os.Exit(m.Run())
}

// TestServedOverStdioAndHTTP: a supervisor reaches a test server over
// stdio (the re-executed test binary) and over Streamable HTTP, in every
// era the supervisor picks, and each tool answers as documented.
func TestServedOverStdioAndHTTP(t *testing.T) {
	_, url := testserver.Serve(t, testserver.Options{})
	_, url2025 := testserver.Serve(t, testserver.Options{Versions: []string{protocol.Version20251125}})
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sup.Close(cctx); err != nil {
			t.Error(err)
		}
	})
	servers := map[string]mcpvisor.ServerConfig{
		"stdio": {Config: testserver.Command()},
		"http":  {Config: transports.Config{URL: url}},
		"old":   {Config: transports.Config{URL: url2025}},
	}
	if _, err := sup.SetServers(ctx, servers, mcpvisor.AwaitSettled(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	for name := range servers {
		res, err := sup.CallTool(ctx, "mcp__"+name+"__echo", map[string]any{"text": "hi"})
		if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "hi" {
			t.Fatalf("%s: echo: %+v, %v", name, res, err)
		}
		res, err = sup.CallTool(ctx, "mcp__"+name+"__add", map[string]any{"a": 2, "b": 3})
		if err != nil || string(res.StructuredContent) != `{"sum":5}` {
			t.Fatalf("%s: add: %+v, %v", name, res, err)
		}
		res, err = sup.CallToolWith(ctx, "mcp__"+name+"__meta", nil, mcpvisor.CallOptions{Meta: protocol.Meta{"x": json.RawMessage(`1`)}})
		if err != nil || len(res.Content) != 1 {
			t.Fatalf("%s: meta: %+v, %v", name, res, err)
		}
		var meta map[string]json.RawMessage
		if err := json.Unmarshal([]byte(res.Content[0].Text), &meta); err != nil || string(meta["x"]) != "1" {
			t.Fatalf("%s: meta answered %s (%v)", name, res.Content[0].Text, err)
		}
	}
}
