package peers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The two eras every client is measured in: the newest (2026-07-28,
// negotiated through server/discover) by default, and the last version of
// the initialize handshake, pinned.
const (
	eraModern = "modern"
	eraLegacy = "2025-11-25"
)

var eras = []string{eraModern, eraLegacy}

// wantVersion is the protocol version each era must negotiate.
var wantVersion = map[string]string{eraModern: "2026-07-28", eraLegacy: "2025-11-25"}

// echoText is the 16-byte text every benchmarked call echoes.
const echoText = "0123456789abcdef"

// echoArgs are the echo tool's arguments, pre-encoded, so that every client
// is given the same bytes and no client pays for encoding a map.
var echoArgs = json.RawMessage(`{"text":"` + echoText + `"}`)

// mockArgs are the mock server's flags: a well-behaved server, no extra
// tools, no latency.
var mockArgs = []string{}

// session is one connected client: it calls echo and closes.
type session interface {
	// echo calls the echo tool with echoArgs and returns the text echoed.
	echo(ctx context.Context) (string, error)
	// version is the negotiated protocol version.
	version() string
	// close ends the session and waits for the server process to exit.
	close() error
}

// peer is one client library. connect spawns the mock server, negotiates
// the era (era=modern: the library's default; otherwise the pinned
// version), lists the tools and returns the live session.
type peer struct {
	name    string
	connect func(ctx context.Context, bin, era string) (session, error)
}

var peers = []peer{
	{"mcpvisor", connectMcpvisor},
	{"gosdk", connectGoSDK},
	{"mcpgo", connectMcpGo},
}

func pinned(era string) string {
	if era == eraModern {
		return ""
	}
	return era
}

// --- mcpvisor ---

type mcpvisorSession struct{ sup *mcpvisor.Supervisor }

func connectMcpvisor(ctx context.Context, bin, era string) (session, error) {
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	if err != nil {
		return nil, err
	}
	s := &mcpvisorSession{sup}
	cfg := mcpvisor.ServerConfig{
		Config:          transports.Config{Command: bin, Args: mockArgs},
		ProtocolVersion: pinned(era),
	}
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"m": cfg})
	if err == nil && len(res.Errors) > 0 {
		err = fmt.Errorf("SetServers: %v", res.Errors)
	}
	if err == nil {
		err = sup.WaitSettled(ctx)
	}
	if err == nil {
		if st := sup.Status(); len(st) != 1 || st[0].State != mcpvisor.StateReady {
			err = fmt.Errorf("server not ready: %+v", st)
		}
	}
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

func (s *mcpvisorSession) echo(ctx context.Context) (string, error) {
	res, err := s.sup.CallTool(ctx, "mcp__m__echo", echoArgs)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	return res.Content[0].Text, nil
}

func (s *mcpvisorSession) version() string {
	if st := s.sup.Status(); len(st) == 1 {
		return st[0].ProtocolVersion
	}
	return ""
}

func (s *mcpvisorSession) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.sup.Close(ctx)
}

// --- official go-sdk ---

type goSDKSession struct{ cs *mcp.ClientSession }

func connectGoSDK(ctx context.Context, bin, era string) (session, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "peers-bench", Version: "1.0.0"}, nil)
	t := &mcp.CommandTransport{Command: exec.Command(bin, mockArgs...)}
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: pinned(era)})
	if err != nil {
		return nil, err
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return nil, errors.Join(err, cs.Close())
	}
	return &goSDKSession{cs}, nil
}

func (s *goSDKSession) echo(ctx context.Context) (string, error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: echoArgs})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("unexpected content %T", res.Content[0])
	}
	return tc.Text, nil
}

func (s *goSDKSession) version() string {
	if r := s.cs.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

func (s *goSDKSession) close() error { return s.cs.Close() }

// --- mark3labs/mcp-go ---

type mcpGoSession struct {
	c   *mcpgoclient.Client
	ver string
}

func connectMcpGo(ctx context.Context, bin, era string) (session, error) {
	c, err := mcpgoclient.NewStdioMCPClient(bin, nil, mockArgs...)
	if err != nil {
		return nil, err
	}
	var req mcpgo.InitializeRequest
	req.Params.ClientInfo = mcpgo.Implementation{Name: "peers-bench", Version: "1.0.0"}
	// A version before 2026-07-28 keeps mcp-go on the initialize handshake
	// (no server/discover probe); empty means its newest.
	req.Params.ProtocolVersion = pinned(era)
	init, err := c.Initialize(ctx, req)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if _, err := c.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return &mcpGoSession{c: c, ver: init.ProtocolVersion}, nil
}

func (s *mcpGoSession) echo(ctx context.Context) (string, error) {
	var req mcpgo.CallToolRequest
	req.Params.Name = "echo"
	req.Params.Arguments = echoArgs
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	tc, ok := mcpgo.AsTextContent(res.Content[0])
	if !ok {
		return "", fmt.Errorf("unexpected content %T", res.Content[0])
	}
	return tc.Text, nil
}

func (s *mcpGoSession) version() string { return s.ver }

func (s *mcpGoSession) close() error { return s.c.Close() }
