package harness

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
	"github.com/mcpvisor/mcpvisor/transports"
)

// The two eras every client is measured in: the newest (2026-07-28,
// negotiated through server/discover) by default, and the last version of
// the initialize handshake, pinned.
const (
	EraModern = "modern"
	EraLegacy = "2025-11-25"
)

// Eras are both eras, newest first.
var Eras = []string{EraModern, EraLegacy}

// WantVersion is the protocol version each era must negotiate.
var WantVersion = map[string]string{EraModern: "2026-07-28", EraLegacy: "2025-11-25"}

// EchoText is the 16-byte text every benchmarked call echoes.
const EchoText = "0123456789abcdef"

// EchoArgs are the echo tool's arguments, pre-encoded, so that every client
// is given the same bytes and no client pays for encoding a map.
var EchoArgs = json.RawMessage(`{"text":"` + EchoText + `"}`)

// Session is one connected client: it calls echo and closes. Echo may be
// called concurrently; Close once, after the last Echo has returned.
type Session interface {
	// Echo calls the echo tool with EchoArgs (or its server's, see
	// Command) and returns the text echoed.
	Echo(ctx context.Context) (string, error)
	// Version is the negotiated protocol version.
	Version() string
	// Close ends the session: over stdio it waits for the server process
	// to exit; over Streamable HTTP it ends the server's session (DELETE,
	// in the session eras) and leaves the server running.
	Close() error
}

// Command is a stdio server to spawn: the program and its arguments, and
// the arguments its echo tool takes (nil: EchoArgs).
type Command struct {
	Path     string
	Args     []string
	EchoArgs json.RawMessage
}

// echoArgs are the echo tool's arguments of the server cmd starts.
func (cmd Command) echoArgs() json.RawMessage {
	if cmd.EchoArgs == nil {
		return EchoArgs
	}
	return cmd.EchoArgs
}

// Peer is one client library. The connectors negotiate the era
// (EraModern: the library's default; otherwise the pinned version), list
// the tools and return the live session: Connect spawns cmd and talks to
// it over stdio; ConnectHTTP talks Streamable HTTP to the running server
// at url; ConnectWS talks WebSocket to the running server at url (ws://…),
// and is nil for the libraries without a WebSocket client (go-sdk and
// mcp-go have none).
type Peer struct {
	Name        string
	Connect     func(ctx context.Context, cmd Command, era string) (Session, error)
	ConnectHTTP func(ctx context.Context, url, era string) (Session, error)
	ConnectWS   func(ctx context.Context, url, era string) (Session, error)
}

// The clients' names.
const (
	Mcpvisor = "mcpvisor"
	GoSDK    = "gosdk"
	McpGo    = "mcpgo"
	// McpGoListen is mcp-go over Streamable HTTP with its standalone GET
	// stream (WithContinuousListening), which it does not open by
	// default: a row of the connect scenario, not a peer of its own.
	McpGoListen = "mcpgo-listen"
)

// Peers are the clients measured, mcpvisor first.
var Peers = []Peer{
	{Mcpvisor, ConnectMcpvisor, ConnectMcpvisorHTTP, ConnectMcpvisorWS},
	{GoSDK, ConnectGoSDK, ConnectGoSDKHTTP, nil},
	{McpGo, ConnectMcpGo, ConnectMcpGoHTTP, nil},
}

// PeerByName returns the peer called name.
func PeerByName(name string) (Peer, bool) {
	for _, p := range Peers {
		if p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}

// PeerHTTPClient is the HTTP client the other libraries are given over
// Streamable HTTP: one for the whole process, as their defaults are
// (go-sdk: http.DefaultClient; mcp-go: http.DefaultTransport), but keeping
// as many idle connections per host as mcpvisor's (transports/httpclient:
// 64) instead of net/http's 2, so that 32 calls in flight do not open and
// close a connection per call. The number of connections is not capped:
// every idle session's standalone GET stream holds one.
var PeerHTTPClient = NewPooledHTTPClient()

// NewPooledHTTPClient returns a client on a clone of net/http's default
// transport keeping 64 idle connections per host.
func NewPooledHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}
}

// Pinned is the version to pin for era: none for EraModern.
func Pinned(era string) string {
	if era == EraModern {
		return ""
	}
	return era
}

// --- mcpvisor ---

type mcpvisorSession struct {
	sup  *mcpvisor.Supervisor
	args json.RawMessage
}

// ConnectMcpvisor starts a Supervisor with the one stdio server cmd.
func ConnectMcpvisor(ctx context.Context, cmd Command, era string) (Session, error) {
	s, err := startMcpvisor(ctx, transports.Config{Command: cmd.Path, Args: cmd.Args}, era)
	if err != nil {
		return nil, err
	}
	s.args = cmd.echoArgs()
	return s, nil
}

// ConnectMcpvisorHTTP starts a Supervisor with the one Streamable HTTP
// server at url.
func ConnectMcpvisorHTTP(ctx context.Context, url, era string) (Session, error) {
	return asSession(startMcpvisor(ctx, transports.Config{Type: transports.TypeHTTP, URL: url}, era))
}

// ConnectMcpvisorWS starts a Supervisor with the one WebSocket server at
// url.
func ConnectMcpvisorWS(ctx context.Context, url, era string) (Session, error) {
	return asSession(startMcpvisor(ctx, transports.Config{Type: transports.TypeWS, URL: url}, era))
}

// ConnectMcpvisorWith is ConnectMcpvisor with the Supervisor's options
// (a tracer provider, for the cost of tracing).
func ConnectMcpvisorWith(ctx context.Context, cmd Command, era string, opts mcpvisor.Options) (Session, error) {
	s, err := startMcpvisorWith(ctx, transports.Config{Command: cmd.Path, Args: cmd.Args}, era, opts)
	if err != nil {
		return nil, err
	}
	s.args = cmd.echoArgs()
	return s, nil
}

// startMcpvisor starts a Supervisor with the one server m reached through
// tc and waits until it is ready.
func startMcpvisor(ctx context.Context, tc transports.Config, era string) (*mcpvisorSession, error) {
	return startMcpvisorWith(ctx, tc, era, mcpvisor.Options{})
}

// startMcpvisorWith is startMcpvisor with the Supervisor's options.
func startMcpvisorWith(ctx context.Context, tc transports.Config, era string, opts mcpvisor.Options) (*mcpvisorSession, error) {
	sup, err := mcpvisor.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	s := &mcpvisorSession{sup: sup, args: EchoArgs}
	cfg := mcpvisor.ServerConfig{Config: tc, ProtocolVersion: Pinned(era)}
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
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *mcpvisorSession) Echo(ctx context.Context) (string, error) {
	res, err := s.sup.CallTool(ctx, "mcp__m__echo", s.args)
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("unexpected result %+v", res)
	}
	return res.Content[0].Text, nil
}

func (s *mcpvisorSession) Version() string {
	if st := s.sup.Status(); len(st) == 1 {
		return st[0].ProtocolVersion
	}
	return ""
}

func (s *mcpvisorSession) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.sup.Close(ctx)
}

// --- official go-sdk ---

type goSDKSession struct {
	cs   *mcp.ClientSession
	args json.RawMessage
}

// ConnectGoSDK connects the official SDK's client to the stdio server cmd
// (CommandTransport).
func ConnectGoSDK(ctx context.Context, cmd Command, era string) (Session, error) {
	s, err := startGoSDK(ctx, &mcp.CommandTransport{Command: exec.Command(cmd.Path, cmd.Args...)}, era)
	if err != nil {
		return nil, err
	}
	s.args = cmd.echoArgs()
	return s, nil
}

// ConnectGoSDKHTTP connects with the library's defaults (the standalone
// GET stream in the session eras) except for the HTTP client.
func ConnectGoSDKHTTP(ctx context.Context, url, era string) (Session, error) {
	return asSession(startGoSDK(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: PeerHTTPClient}, era))
}

func startGoSDK(ctx context.Context, t mcp.Transport, era string) (*goSDKSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "peers-bench", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: Pinned(era)})
	if err != nil {
		return nil, err
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return nil, errors.Join(err, cs.Close())
	}
	return &goSDKSession{cs: cs, args: EchoArgs}, nil
}

func (s *goSDKSession) Echo(ctx context.Context) (string, error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: s.args})
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

func (s *goSDKSession) Version() string {
	if r := s.cs.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

func (s *goSDKSession) Close() error { return s.cs.Close() }

// --- mark3labs/mcp-go ---

type mcpGoSession struct {
	c          *mcpgoclient.Client
	ver        string
	args       json.RawMessage
	stopListen func() // the subscriptions/listen stream's, if one was opened
}

// ConnectMcpGo connects mcp-go's stdio client to cmd.
func ConnectMcpGo(ctx context.Context, cmd Command, era string) (Session, error) {
	return connectMcpGoStdio(ctx, cmd, era, false)
}

// ConnectMcpGoListen is ConnectMcpGo that also opens a
// subscriptions/listen stream for tool list changes between the
// negotiation and the listing (era 2026-07-28; mcp-go does not open one
// by default): the connect mcpvisor makes.
func ConnectMcpGoListen(ctx context.Context, cmd Command, era string) (Session, error) {
	return connectMcpGoStdio(ctx, cmd, era, true)
}

func connectMcpGoStdio(ctx context.Context, cmd Command, era string, listen bool) (Session, error) {
	c, err := mcpgoclient.NewStdioMCPClient(cmd.Path, nil, cmd.Args...)
	if err != nil {
		return nil, err
	}
	s, err := startMcpGo(ctx, c, era, listen)
	if err != nil {
		return nil, err
	}
	s.args = cmd.echoArgs()
	return s, nil
}

// ConnectMcpGoHTTP connects with the library's defaults (no standalone
// GET stream) except for the HTTP client.
func ConnectMcpGoHTTP(ctx context.Context, url, era string) (Session, error) {
	return ConnectMcpGoHTTPWith(ctx, url, era)
}

// ConnectMcpGoHTTPWith is ConnectMcpGoHTTP with more transport options,
// such as mcpgotransport.WithContinuousListening.
func ConnectMcpGoHTTPWith(ctx context.Context, url, era string, opts ...mcpgotransport.StreamableHTTPCOption) (Session, error) {
	opts = append([]mcpgotransport.StreamableHTTPCOption{
		mcpgotransport.WithHTTPBasicClient(PeerHTTPClient),
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
	return asSession(startMcpGo(ctx, c, era, false))
}

// startMcpGo negotiates the era on a started client, opens a
// subscriptions/listen stream if listen is set, and lists the tools.
func startMcpGo(ctx context.Context, c *mcpgoclient.Client, era string, listen bool) (*mcpGoSession, error) {
	var req mcpgo.InitializeRequest
	req.Params.ClientInfo = mcpgo.Implementation{Name: "peers-bench", Version: "1.0.0"}
	// A version before 2026-07-28 keeps mcp-go on the initialize handshake
	// (no server/discover probe); empty means its newest.
	req.Params.ProtocolVersion = Pinned(era)
	init, err := c.Initialize(ctx, req)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	s := &mcpGoSession{c: c, ver: init.ProtocolVersion, args: EchoArgs}
	if listen {
		// The stream lives as long as the session, not the connect's ctx.
		if s.stopListen, err = c.ListenAsync(context.Background(), mcpgo.SubscriptionFilter{ToolsListChanged: true}, nil); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	if _, err := c.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *mcpGoSession) Echo(ctx context.Context) (string, error) {
	var req mcpgo.CallToolRequest
	req.Params.Name = "echo"
	req.Params.Arguments = s.args
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

func (s *mcpGoSession) Version() string { return s.ver }

func (s *mcpGoSession) Close() error {
	err := s.c.Close()
	if s.stopListen != nil {
		s.stopListen()
	}
	return err
}

// asSession is a connector's session as a Session: nil (not a typed nil)
// with an error.
func asSession[T Session](s T, err error) (Session, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}
