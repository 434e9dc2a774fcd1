// Package mockserver is a configurable MCP server for load tests and fault
// injection. It speaks every protocol era mcpvisor does, serves a set of
// tools, resources and prompts of any size, and can misbehave on purpose:
// exit after N calls, crash in the middle of an answer, hang, answer
// slowly, print garbage, send oversize frames, ignore SIGTERM, leave a
// grandchild behind, demand authorization, expire sessions, answer with
// bursts of 503s, drop streams, or flap (go down and come back, again and
// again).
//
// It runs over stdio (`mcpvisor mock`, or a test binary re-executing
// itself; see Command) and is deliberately lean there, so that a benchmark
// measures the client, not the server. It also serves the HTTP-based
// transports (see Options.Transport): Streamable HTTP at /mcp, both with
// sessions (2025-03-26 … 2025-11-25) and stateless (2026-07-28), the legacy
// HTTP+SSE transport (2024-11-05) at /sse and /message, and WebSocket at
// /ws, each with its own faults. Serve runs one in process; NewHandler
// returns its http.Handler.
//
// The protocol itself (framing, eras, sessions, streams, list_changed
// fan-out) is mcpserver's, shared with mcpvisor's gateway: the mock is a
// catalogue (catalog.go, a mcpserver.Handler), fixtures for the
// conformance suite, and its faults, made of mcpserver's seams
// (faults.go: middleware around the handler, a hook around every frame
// written, answers written on the wire by hand), plus two transports of
// its own on mcpserver.ServeConn (the legacy HTTP+SSE and WebSocket).
//
// Its one job: be an MCP server whose behaviour a test chooses. The
// server type is the catalogue (tools, resources, prompts, the fixtures'
// dispatch) and holds two parts, each with its own lock: faults (the
// fault middleware and frame hook, and what they count) and extensions
// (channels, subscriptions, progress). Requests run on mcpserver's
// goroutines, several at once: every piece of state is guarded by its
// part's mutex or is an atomic (see each type); Options and the parts'
// wiring are set once by newServer and only read after. Answers given
// later run on goroutines counted by server.wg.
package mockserver

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Options describe the server's catalogue and its faults. The zero value
// is a well-behaved server with the standard tools and every version.
type Options struct {
	Name      string        // serverInfo.name; default "mockserver"
	Tools     int           // extra tools tool_001…tool_N besides the standard ones
	Resources int           // resources mock://resource/1…N
	Prompts   int           // prompts prompt_1…N
	Latency   time.Duration // delay before answering each tools/call
	InitDelay time.Duration // start-up: initialize and server/discover are answered once this long has passed since the first of them
	Payload   int           // echo answers with this many bytes instead of its input
	Versions  []string      // versions served, newest first; default all
	PageSize  int           // list page size; 0 = everything in one page

	ExitAfter     int   // exit (code 3) on receiving tools/call number ExitAfter+1
	ExitAtStart   bool  // exit (code 4) before reading anything
	HangOnCall    bool  // never answer tools/call
	Garbage       bool  // write a non-JSON line and a malformed frame before each answer
	OversizeBytes int64 // answer tools/call with a frame of this size
	IgnoreSIGTERM bool  // ignore SIGTERM and stdin EOF: only SIGKILL ends it
	Grandchild    bool  // start a sleeping child process in the same group
	Silent        bool  // answer nothing at all (a hung server)
	// MuteOnCall makes the server go silent on receiving tools/call
	// number MuteOnCall (from 1): it keeps reading, and answers nothing
	// more, not even ping (a server deadlocked after its handshake).
	MuteOnCall int
	// StallOnCall makes the server stop reading its input on receiving
	// tools/call number StallOnCall (from 1), for good: over stdio the
	// pipe fills and writes to it block (a server blocked on its own
	// upstream). Over HTTP that request never ends.
	StallOnCall int
	// NotifyTool adds the tool "notify" {method, params}: it sends that
	// notification to every connection (not to subscriptions/listen
	// streams), then answers.
	NotifyTool bool
	// Redescribe adds the tool "redescribe" {tool, text}: it changes the
	// description of the tool named tool to text and sends
	// tools/list_changed (a "rug pull": a tool's definition changing
	// under a client that already relies on it).
	Redescribe bool
	// Describe replaces the descriptions of tools from the start, by tool
	// name (a server whose definitions changed since it last ran).
	Describe map[string]string
	// Conformance serves the fixtures of the conformance suite's server
	// scenarios (see conformance.go) besides the standard catalogue.
	Conformance bool
	// FailLists answers the first FailLists requests of FailListMethod
	// (default tools/list) with a JSON-RPC internal error, over every
	// transport: a server whose listing fails while its connection is
	// fine. The count is the server's, not a connection's.
	FailLists      int
	FailListMethod string
	// LogLevelTool adds the tool "loglevel": it answers, as JSON text,
	// {"setLevel": the level of the session's last logging/setLevel,
	// "meta": the io.modelcontextprotocol/logLevel of the call's own
	// _meta}, each "" when absent: what the client asked for, as the
	// server received it.
	LogLevelTool bool
	// BlockTool adds the tool "block" {ms}: it sleeps ms milliseconds on
	// the goroutine that reads the connection, then answers. Meanwhile
	// the server reads nothing and answers nothing, not even ping, and
	// sends no progress: a single-threaded server busy with one long
	// blocking call (connection transports; over HTTP only that request
	// waits).
	BlockTool bool
	// Instructions are the instructions the server gives at initialize
	// (and in server/discover); "" gives none.
	Instructions string

	// CacheTTL and CacheScope are the caching hints (SEP-2549) the server
	// puts on its discover, list and resources/read results for clients
	// of the stateless era: ttlMs (default 60 s; negative: 0) and
	// cacheScope ("public", the default, or "private").
	CacheTTL   time.Duration
	CacheScope string

	// Channel makes it a channel server (capabilities claude/channel and
	// claude/channel/permission, tool channel_burst {n, prefix}); it
	// echoes permission requests and verdicts it receives as channel
	// messages. Subscribe adds resources/subscribe (and the
	// resourceSubscriptions of subscriptions/listen; only mock:// URIs are
	// agreed to) and the tool touch {uri}, over every transport. Progress
	// adds the tools progress {steps, ms} and cancelled. Channel and
	// Progress: connection transports (stdio, WebSocket) only.
	Channel, Subscribe, Progress bool
	// ChannelAtStart, with Channel, pushes this many channel messages
	// (content start<i>, meta {i}) right after answering the first
	// tools/list, the end of a client's connect: messages a server sends
	// on its own, before anyone asked or waits.
	ChannelAtStart int

	// CrashMidResponse makes every tools/call crash the server (code 5)
	// while it answers: after Latency, it writes the first half of the
	// answer and exits, as a process dying in the middle of a write.
	// Over stdio that is half a line, without its newline. Over
	// Streamable HTTP it is a 200 whose Content-Length counts the whole
	// answer with half the body, or, with SSEResponses, an event stream
	// whose answer event stops halfway; over HTTP+SSE the session's
	// stream stops halfway through the answer's event; over WebSocket a
	// frame header announces the whole answer and half the payload
	// follows. Then every connection closes (Serve stops, and Run
	// returns 5).
	CrashMidResponse bool

	// FlapUp makes the server flap: it serves for FlapUp, goes down, and
	// comes back. Over stdio the process exits (code 6) after FlapUp and
	// it is up to its supervisor to start it again; FlapDown does not
	// apply. With an HTTP transport Serve stays up for FlapUp, then for
	// FlapDown it closes its listener and every open connection (HTTP
	// requests, event streams and WebSockets alike), so that clients see
	// refused and reset connections, then listens again on the same
	// address and port, and so on until the server is closed. Sessions
	// do not survive a down period, as if the process had restarted:
	// an old Mcp-Session-Id (or sessionId) gets 404 afterwards; the
	// catalogue (announced tools) and the fault counters carry on.
	FlapUp   time.Duration
	FlapDown time.Duration // with FlapUp: how long each down period of the HTTP transports lasts

	// Transport is TransportStdio (Run's default), TransportHTTP,
	// TransportSSE or TransportWS. NewHandler and Serve treat "" as
	// TransportHTTP.
	Transport string
	// Listen is the TCP address the HTTP transports listen on; default
	// DefaultListen (a free loopback port).
	Listen string

	// Streamable HTTP only.
	SSEResponses bool          // answer POSTed requests with an event stream instead of JSON; in a session, a priming event (id, retry, empty data) comes first
	SSERetry     time.Duration // retry field of the priming event; default DefaultSSERetry
	NoGetStream  bool          // answer GET /mcp with 405: no standalone stream
	DropStream   bool          // with SSEResponses: close a tools/call stream after the priming event, leaving the response to a GET with Last-Event-ID
	ListenCut    time.Duration // cut subscriptions/listen streams (2026-07-28) after this long, without a response
	// CutStreams loses the answers of the first N requests of the
	// stateless era (2026-07-28) other than server/discover and
	// subscriptions/listen: each is processed, then its response breaks
	// before the answer. With SSEResponses the event stream ends without
	// it; otherwise the connection closes before any response.
	CutStreams int
	CutMethod  string // with CutStreams: count and break only requests of this method

	// Every HTTP transport.
	HTTP5xx            int           // answer the first N POSTs after the first initialize or server/discover with 503
	ExpireSessionAfter int           // forget a session once it has answered N tools/call; its next request gets 404
	FirstByteDelay     time.Duration // wait this long before writing any response's status line

	// HTTP401 answers every request of the HTTP transports (the
	// initialize or server/discover POST, the GET of an event stream, the
	// WebSocket upgrade, and everything else, the protected resource
	// metadata URL included) with 401 Unauthorized, a small JSON body
	// and the challenge of a server that needs an OAuth token:
	//
	//	WWW-Authenticate: Bearer resource_metadata="<base URL>/.well-known/oauth-protected-resource", error="invalid_token"
	//
	// where the base URL is http:// and the request's Host.
	HTTP401 bool
}

// Exit codes of the exit faults (Run's result, ExitCode's for Serve).
const (
	exitAfterCalls = 3 // ExitAfter
	exitAtStart    = 4 // ExitAtStart
	exitCrash      = 5 // CrashMidResponse
	exitFlap       = 6 // FlapUp, over stdio
)

// Names of the transports, for Options.Transport.
const (
	TransportStdio = "stdio" // newline-delimited JSON-RPC on stdin and stdout
	TransportHTTP  = "http"  // Streamable HTTP at /mcp
	TransportSSE   = "sse"   // HTTP+SSE (2024-11-05): GET /sse, POST /message?sessionId=…
	TransportWS    = "ws"    // WebSocket at /ws, subprotocol "mcp", one text message per JSON-RPC message
)

// Defaults of the HTTP transports' options.
const (
	DefaultListen   = "127.0.0.1:0"
	DefaultSSERetry = 500 * time.Millisecond
)

// URLLinePrefix starts the one line a mock server run by Main with an
// HTTP transport writes to stderr once it listens: the prefix, then the
// endpoint's URL (http://…/mcp, http://…/sse or ws://…/ws).
const URLLinePrefix = "MCPVISOR_MOCK_URL="

// EnvRole marks a process started to act as a mock server (or as its
// grandchild). Test binaries and the mcpvisor binary check it first thing
// in main/TestMain: see IsRequested and Main.
const EnvRole = "MCPVISOR_MOCKSERVER"

// IsRequested reports whether this process was started as a mock server.
func IsRequested() bool { return os.Getenv(EnvRole) != "" }

// Command returns the transport config that runs a mock server with the
// given flags by re-executing the current binary, which must call Main
// when IsRequested (mcpvisor does; so do tests that use this).
func Command(args ...string) transports.Config {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	// GORACE matters only to a race-enabled binary (a test binary): its
	// default makes every exit sleep 1 s, which would dominate shutdowns.
	env := map[string]string{EnvRole: "server", "GORACE": "atexit_sleep_ms=0"}
	return transports.Config{Command: exe, Args: args, Env: env}
}

// Main runs a mock server with flags from args and returns the exit code:
// over stdin/stdout, or with an HTTP transport until SIGTERM, SIGINT or the
// end of stdin (see Run). When the process is a grandchild (EnvRole =
// "sleeper") it sleeps until killed.
func Main(args []string) int {
	if os.Getenv(EnvRole) == "sleeper" {
		signal.Ignore(syscall.SIGHUP)
		select {}
	}
	opts, err := ParseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mockserver:", err)
		return 2
	}
	ctx := context.Background()
	if opts.Transport != TransportStdio && !opts.IgnoreSIGTERM {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
		defer stop()
	}
	return Run(ctx, opts, os.Stdin, os.Stdout)
}

// ParseFlags reads Options from command-line flags. -h returns
// flag.ErrHelp.
func ParseFlags(args []string) (Options, error) {
	var o Options
	var versions string
	fs := flagSet(&o, &versions)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch o.Transport {
	case TransportStdio, TransportHTTP, TransportSSE, TransportWS:
	default:
		return o, fmt.Errorf("unknown transport %q (want stdio, http, sse or ws)", o.Transport)
	}
	if o.FlapUp < 0 || o.FlapDown < 0 {
		return o, fmt.Errorf("negative -flap-up or -flap-down")
	}
	if o.FlapDown > 0 && o.FlapUp == 0 {
		return o, fmt.Errorf("-flap-down needs -flap-up")
	}
	if versions != "" {
		for _, v := range strings.Split(versions, ",") {
			v = strings.TrimSpace(v)
			if !protocol.IsSupported(v) {
				return o, fmt.Errorf("unknown protocol version %q", v)
			}
			o.Versions = append(o.Versions, v)
		}
	}
	return o, nil
}

// FlagSet returns a new flag set of the flags ParseFlags accepts, bound
// to values nobody reads: for a host that documents them in its own
// layout.
func FlagSet() *flag.FlagSet { return flagSet(new(Options), new(string)) }

// Usage describes the flags ParseFlags accepts.
func Usage() string {
	var b strings.Builder
	fs := flagSet(new(Options), new(string))
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

func flagSet(o *Options, versions *string) *flag.FlagSet {
	fs := flag.NewFlagSet("mock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Name, "name", "mockserver", "serverInfo.name")
	fs.IntVar(&o.Tools, "tools", 0, "extra tools tool_001…tool_N besides echo, add, fail, sleep and announce")
	fs.IntVar(&o.Resources, "resources", 0, "resources mock://resource/1…N (and one template)")
	fs.IntVar(&o.Prompts, "prompts", 0, "prompts prompt_1…N")
	fs.DurationVar(&o.Latency, "latency", 0, "delay before answering each tools/call")
	fs.DurationVar(&o.InitDelay, "init-delay", 0, "start-up time: initialize and server/discover are answered once this long has passed since the first of them")
	fs.IntVar(&o.Payload, "payload", 0, "echo answers with this many bytes instead of its text")
	fs.StringVar(versions, "versions", "", "comma-separated protocol versions served, newest first (default all)")
	fs.IntVar(&o.PageSize, "page-size", 0, "items per list page (0: one page)")
	fs.IntVar(&o.ExitAfter, "exit-after", 0, "exit with code 3 on receiving tools/call number N+1")
	fs.BoolVar(&o.ExitAtStart, "exit-at-start", false, "exit at once with code 4")
	fs.BoolVar(&o.HangOnCall, "hang-on-call", false, "never answer tools/call")
	fs.BoolVar(&o.Garbage, "garbage", false, "write a non-JSON line and a malformed frame before each answer")
	fs.Int64Var(&o.OversizeBytes, "oversize", 0, "answer tools/call with a frame of this many bytes")
	fs.BoolVar(&o.IgnoreSIGTERM, "ignore-sigterm", false, "ignore SIGTERM and stdin EOF: only SIGKILL ends it")
	fs.BoolVar(&o.Grandchild, "grandchild", false, "start a sleeping child process in the same process group")
	fs.BoolVar(&o.Silent, "silent", false, "answer nothing at all (a hung server)")
	fs.IntVar(&o.MuteOnCall, "mute-on-call", 0, "on receiving tools/call number `N`, go silent: read everything, answer nothing (not even ping)")
	fs.IntVar(&o.StallOnCall, "stall-on-call", 0, "on receiving tools/call number `N`, stop reading input for good (stdio: the pipe fills)")
	fs.IntVar(&o.FailLists, "fail-lists", 0, "answer the first `N` requests of -fail-list-method with a JSON-RPC error")
	fs.StringVar(&o.FailListMethod, "fail-list-method", "", "with -fail-lists: the `method` to fail (default tools/list)")
	fs.BoolVar(&o.LogLevelTool, "loglevel-tool", false, "add the tool loglevel: answers the level of the last logging/setLevel and of the call's _meta logLevel")
	fs.StringVar(&o.Instructions, "instructions", "", "give `TEXT` as the server's instructions")
	fs.BoolVar(&o.BlockTool, "block-tool", false, "add the tool block {ms}: sleeps ms milliseconds without reading or answering anything, then answers")
	fs.BoolVar(&o.Conformance, "conformance", false, "also serve the conformance suite's server fixtures (test_* tools, test:// resources, prompts)")
	fs.DurationVar(&o.CacheTTL, "cache-ttl", 0, "ttlMs of the discover, list and resources/read results of 2026-07-28 (default 1m; negative: 0)")
	fs.StringVar(&o.CacheScope, "cache-scope", "", "cacheScope of those results: public (default) or private")
	fs.BoolVar(&o.NotifyTool, "notify-tool", false, "add the tool notify {method, params}: sends that notification to every connection")
	fs.BoolVar(&o.Redescribe, "redescribe", false, "add the tool redescribe {tool, text}: changes the description of tool to text and sends tools/list_changed")
	fs.Var(describeFlag{&o.Describe}, "describe", "`TOOL=TEXT`: describe the tool TOOL as TEXT from the start (repeatable)")
	fs.Func("describe-file", "read `FILE`, a JSON object {tool: text}, and describe those tools so from the start (as -describe; a server that changed since it last ran, its config unchanged)", func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for k, v := range m {
			if err := (describeFlag{&o.Describe}).Set(k + "=" + v); err != nil {
				return err
			}
		}
		return nil
	})
	fs.BoolVar(&o.Channel, "channel", false, "stdio, ws: be a claude/channel server with the tool channel_burst {n, prefix}; echo permission requests and verdicts as channel messages")
	fs.IntVar(&o.ChannelAtStart, "channel-at-start", 0, "with -channel: push `N` channel messages (content start<i>) right after answering the first tools/list")
	fs.BoolVar(&o.Subscribe, "subscribe", false, "serve resources/subscribe, agree to mock:// URIs in subscriptions/listen resourceSubscriptions (2026-07-28), and add the tool touch {uri}, which sends resources/updated when uri is subscribed")
	fs.BoolVar(&o.Progress, "progress", false, "stdio, ws: add the tools progress {steps, ms} (progress notifications) and cancelled (notifications/cancelled received)")
	fs.BoolVar(&o.CrashMidResponse, "crash-mid-response", false,
		"on tools/call write the first half of the answer, then exit with code 5 (every transport; over HTTP the connections close)")
	fs.DurationVar(&o.FlapUp, "flap-up", 0,
		"flap: serve this long, then go down (stdio: exit with code 6; http, sse, ws: close the listener and every connection for -flap-down, then listen again on the same port, and repeat; sessions are forgotten)")
	fs.DurationVar(&o.FlapDown, "flap-down", 0, "http, sse, ws with -flap-up: how long each down period lasts")
	fs.StringVar(&o.Transport, "transport", TransportStdio,
		"stdio, http (Streamable HTTP at /mcp, and at /mcp/<any name> as virtual servers), sse (HTTP+SSE at /sse) or ws (WebSocket at /ws); the HTTP ones print "+URLLinePrefix+"<url> on stderr")
	fs.StringVar(&o.Listen, "listen", DefaultListen, "address the HTTP transports listen on")
	fs.BoolVar(&o.SSEResponses, "sse-responses", false, "http: answer requests with an event stream (priming event first) instead of JSON")
	fs.DurationVar(&o.SSERetry, "sse-retry", DefaultSSERetry, "http: retry field of the priming event")
	fs.BoolVar(&o.NoGetStream, "no-get-stream", false, "http: answer GET /mcp with 405")
	fs.BoolVar(&o.DropStream, "drop-stream", false, "http with -sse-responses: end tools/call streams after the priming event; the response waits for GET + Last-Event-ID")
	fs.IntVar(&o.CutStreams, "cut-streams", 0, "http, 2026-07-28: process the first `N` requests other than server/discover, then break their response before the answer (the event stream ends, or the connection closes)")
	fs.StringVar(&o.CutMethod, "cut-method", "", "with -cut-streams: break only requests of this `method`")
	fs.DurationVar(&o.ListenCut, "listen-cut", 0, "http: cut subscriptions/listen streams after this long, without a response")
	fs.IntVar(&o.HTTP5xx, "http-5xx", 0, "http, sse: answer the first N POSTs after the first initialize or server/discover with 503")
	fs.IntVar(&o.ExpireSessionAfter, "expire-session-after", 0, "http, sse: forget a session after it answered N tools/call (then 404)")
	fs.DurationVar(&o.FirstByteDelay, "first-byte-delay", 0, "http, sse, ws: wait this long before writing any response headers")
	fs.BoolVar(&o.HTTP401, "http-401", false,
		"http, sse, ws: answer every request (the WebSocket upgrade too) with 401 and WWW-Authenticate: Bearer resource_metadata=…, error=\"invalid_token\"")
	return fs
}

// describeFlag is the repeatable -describe TOOL=TEXT flag.
type describeFlag struct{ m *map[string]string }

func (f describeFlag) String() string {
	if f.m == nil || len(*f.m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range *f.m {
			if !yield(k) {
				return
			}
		}
	}) {
		parts = append(parts, k+"="+(*f.m)[k])
	}
	return strings.Join(parts, ",")
}

func (f describeFlag) Set(v string) error {
	name, text, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want TOOL=TEXT, got %q", v)
	}
	if *f.m == nil {
		*f.m = map[string]string{}
	}
	(*f.m)[name] = text
	return nil
}

// Run serves one client over r and w until r ends (or, with
// IgnoreSIGTERM, forever), an exit fault fires, or FlapUp has passed, and
// returns the process exit code. At the end of r it first answers what it
// still owes (the calls a latency delays). With FlapUp, r is read by
// another goroutine, which ends when r does; nothing is written to w after
// Run has returned.
//
// With an HTTP transport it listens on o.Listen instead, writes one line
// URLLinePrefix+url to stderr, and serves until ctx ends, r ends (unless
// IgnoreSIGTERM), or an exit fault fires; w is not used.
func Run(ctx context.Context, o Options, r io.Reader, w io.Writer) int {
	if o.ExitAtStart {
		fmt.Fprintln(os.Stderr, "mockserver: exiting at start as configured")
		return exitAtStart
	}
	if o.IgnoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	if o.Grandchild {
		if err := spawnSleeper(); err != nil {
			fmt.Fprintln(os.Stderr, "mockserver: grandchild:", err)
		}
	}
	if o.Transport != "" && o.Transport != TransportStdio {
		return runNet(ctx, o, r)
	}
	s := newServer(o)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var down <-chan time.Time // FlapUp's end; nil (never) without it
	if o.FlapUp > 0 {
		t := time.NewTimer(o.FlapUp)
		defer t.Stop()
		down = t.C
	}
	served := make(chan error, 1)
	go func() { served <- s.srv.ServeStdio(ctx, drainingReader{r: r, wg: &s.wg}, w) }()
	select {
	case <-served:
	case <-s.dead:
		stop()
		<-served
	case <-down:
		stop()
		<-served
		return flapExit(o.FlapUp)
	}
	if code, dead := s.exitCode(); dead {
		return code
	}
	if o.IgnoreSIGTERM {
		<-down // only SIGKILL ends it, or the flap
		return flapExit(o.FlapUp)
	}
	return 0
}

// drainingReader is stdin for Run: at its end it waits for the answers
// still owed (wg) before it reports it, so that they are written.
type drainingReader struct {
	r  io.Reader
	wg *sync.WaitGroup
}

func (d drainingReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if errors.Is(err, io.EOF) {
		d.wg.Wait()
	}
	return n, err
}

// flapExit ends a stdio server's up period: the process exits with
// exitFlap.
func flapExit(up time.Duration) int {
	fmt.Fprintf(os.Stderr, "mockserver: going down after %v as configured (-flap-up)\n", up)
	return exitFlap
}

// runNet serves an HTTP transport for Run.
func runNet(ctx context.Context, o Options, r io.Reader) int {
	srv, err := Serve(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mockserver:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s%s\n", URLLinePrefix, srv.URL)
	eof := make(chan struct{})
	if r != nil && !o.IgnoreSIGTERM {
		go func() {
			_, _ = io.Copy(io.Discard, r)
			close(eof)
		}()
	}
	select {
	case <-ctx.Done():
	case <-eof:
	case <-srv.Done():
	}
	srv.Close()
	return srv.ExitCode()
}

func spawnSleeper() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvRole+"=sleeper")
	return cmd.Start() // same process group; never waited: it outlives us on purpose
}
