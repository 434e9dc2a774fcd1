package peers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpvisor/mcpvisor"
	mcpsession "github.com/mcpvisor/mcpvisor/actors/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/streamable"
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
	// close ends the session: over stdio it waits for the server process
	// to exit; over Streamable HTTP it ends the server's session (DELETE,
	// in the session eras) and leaves the server running.
	close() error
}

// peer is one client library. Both connectors negotiate the era
// (era=modern: the library's default; otherwise the pinned version), list
// the tools and return the live session: connect spawns the mock server
// binary bin and talks to it over stdio; connectHTTP talks Streamable HTTP
// to the running mock server at url.
type peer struct {
	name        string
	connect     func(ctx context.Context, bin, era string) (session, error)
	connectHTTP func(ctx context.Context, url, era string) (session, error)
}

var peers = []peer{
	{"mcpvisor", connectMcpvisor, connectMcpvisorHTTP},
	{"gosdk", connectGoSDK, connectGoSDKHTTP},
	{"mcpgo", connectMcpGo, connectMcpGoHTTP},
}

// peerHTTPClient is the HTTP client the other libraries are given over
// Streamable HTTP: one for the whole process, as their defaults are
// (go-sdk: http.DefaultClient; mcp-go: http.DefaultTransport), but keeping
// as many idle connections per host as mcpvisor's (transports/httpclient:
// 64) instead of net/http's 2, so that 32 calls in flight do not open and
// close a connection per call. The number of connections is not capped:
// every idle session's standalone GET stream holds one.
var peerHTTPClient = newPeerHTTPClient()

func newPeerHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}
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
	return startMcpvisor(ctx, transports.Config{Command: bin, Args: mockArgs}, era)
}

func connectMcpvisorHTTP(ctx context.Context, url, era string) (session, error) {
	return startMcpvisor(ctx, transports.Config{Type: transports.TypeHTTP, URL: url}, era)
}

// startMcpvisor starts a Supervisor with the one server m reached through
// tc and waits until it is ready.
func startMcpvisor(ctx context.Context, tc transports.Config, era string) (session, error) {
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	if err != nil {
		return nil, err
	}
	s := &mcpvisorSession{sup}
	cfg := mcpvisor.ServerConfig{Config: tc, ProtocolVersion: pinned(era)}
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

// --- mcpvisor's session layer, without a Supervisor ---

// directSession is what one server of a Supervisor holds once connected,
// without the Supervisor: an actors/session.Session over
// transports/streamable. BenchmarkIdleSessionMemory uses it to separate
// the connection's cost from the Supervisor's per-server cost.
type directSession struct{ s *mcpsession.Session }

// connectMcpvisorSession opens a session to url through
// transports/streamable (with its defaults, as a Supervisor sets them up;
// client nil means a client of the session's own, as a Supervisor gives
// each server) and lists the tools.
func connectMcpvisorSession(ctx context.Context, url, era string, client *http.Client) (session, error) {
	cfg := transports.Config{Type: transports.TypeHTTP, URL: url}
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		return streamable.Dial(ctx, cfg, streamable.Options{Client: client, UserAgent: "peers-bench/1.0.0"}, r)
	}
	s, err := mcpsession.Open(ctx, dial, mcpsession.Options{
		ClientInfo:      protocol.Implementation{Name: "peers-bench", Version: "1.0.0"},
		ProtocolVersion: pinned(era),
	})
	if err != nil {
		return nil, err
	}
	d := &directSession{s}
	if _, err := s.ListTools(ctx); err != nil {
		return nil, errors.Join(err, d.close())
	}
	return d, nil
}

func (d *directSession) echo(ctx context.Context) (string, error) {
	res, err := d.s.CallTool(ctx, "echo", echoArgs, nil)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	return res.Content[0].Text, nil
}

func (d *directSession) version() string { return d.s.ProtocolVersion() }

func (d *directSession) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.s.Close(ctx, nil)
}

// --- official go-sdk ---

type goSDKSession struct{ cs *mcp.ClientSession }

func connectGoSDK(ctx context.Context, bin, era string) (session, error) {
	return startGoSDK(ctx, &mcp.CommandTransport{Command: exec.Command(bin, mockArgs...)}, era)
}

// connectGoSDKHTTP connects with the library's defaults (the standalone
// GET stream in the session eras) except for the HTTP client.
func connectGoSDKHTTP(ctx context.Context, url, era string) (session, error) {
	return startGoSDK(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: peerHTTPClient}, era)
}

func startGoSDK(ctx context.Context, t mcp.Transport, era string) (session, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "peers-bench", Version: "1.0.0"}, nil)
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
	return startMcpGo(ctx, c, era)
}

// connectMcpGoHTTP connects with the library's defaults (no standalone
// GET stream) except for the HTTP client.
func connectMcpGoHTTP(ctx context.Context, url, era string) (session, error) {
	return connectMcpGoHTTPWith(ctx, url, era)
}

// connectMcpGoHTTPWith is connectMcpGoHTTP with more transport options,
// such as mcpgotransport.WithContinuousListening.
func connectMcpGoHTTPWith(ctx context.Context, url, era string, opts ...mcpgotransport.StreamableHTTPCOption) (session, error) {
	opts = append([]mcpgotransport.StreamableHTTPCOption{
		mcpgotransport.WithHTTPBasicClient(peerHTTPClient),
		// Its default, slog.Default, reports every standalone GET stream
		// the server ends (at close) as an error on stderr.
		mcpgotransport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	}, opts...)
	c, err := mcpgoclient.NewStreamableHttpClient(url, opts...)
	if err != nil {
		return nil, err
	}
	// The transport's background work (the GET stream, when enabled) lives
	// as long as Start's context: not the connect deadline.
	if err := c.Start(context.Background()); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return startMcpGo(ctx, c, era)
}

// startMcpGo negotiates the era on a started client and lists the tools.
func startMcpGo(ctx context.Context, c *mcpgoclient.Client, era string) (session, error) {
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
