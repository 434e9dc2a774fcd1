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
// Request handling does not know where answers go: every request is
// dispatched with an output that receives its answer (the stdio writer, a
// WebSocket, or the request's own HTTP response stream), and
// server-initiated notifications (tools/list_changed from the announce
// tool) go through a hub to every connection, session stream and
// subscriptions/listen stream that takes them.
package mockserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	InitDelay time.Duration // delay before answering initialize or server/discover
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
	fs.DurationVar(&o.InitDelay, "init-delay", 0, "delay before answering initialize or server/discover")
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
		"stdio, http (Streamable HTTP at /mcp), sse (HTTP+SSE at /sse) or ws (WebSocket at /ws); the HTTP ones print "+URLLinePrefix+"<url> on stderr")
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
// returns the process exit code. With FlapUp, r is read by another
// goroutine, which ends when r does; nothing is written to w after Run
// has returned.
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
	out := &stdioConn{garbage: o.Garbage, out: bufio.NewWriterSize(w, 64<<10)}
	p := &peer{conn: out}
	s.hub.add(out)
	br := bufio.NewReaderSize(r, 64<<10)
	var down <-chan time.Time // FlapUp's end; nil (never) without it
	var end stdioEnd
	if o.FlapUp <= 0 {
		end = s.serveStdio(ctx, p, br, out) // in this goroutine: the lean path
	} else {
		t := time.NewTimer(o.FlapUp)
		defer t.Stop()
		down = t.C
		ended := make(chan stdioEnd, 1)
		go func() { ended <- s.serveStdio(ctx, p, br, out) }()
		select {
		case end = <-ended:
		case <-down:
			return flapExit(out, o.FlapUp)
		}
	}
	if end.exit {
		return end.code
	}
	s.wg.Wait()
	if o.IgnoreSIGTERM {
		<-down // only SIGKILL ends it, or the flap
		return flapExit(out, o.FlapUp)
	}
	return 0
}

// stdioEnd is how serveStdio ended: at the end of its input, or with an
// exit fault (exit) and its code.
type stdioEnd struct {
	code int
	exit bool
}

// serveStdio handles the lines of br until it ends or an exit fault
// fires.
func (s *server) serveStdio(ctx context.Context, p *peer, br *bufio.Reader, out *stdioConn) stdioEnd {
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: keep its start before the
			// next read overwrites it.
			head := slices.Clone(line)
			rest, err2 := br.ReadBytes('\n')
			line, err = append(head, rest...), err2
		}
		if len(line) > 0 {
			// While more lines wait in br, answers stay in the buffer:
			// one write for a burst of requests, as the floor's echo
			// server does. The last line of a burst flushes them all.
			more := bytes.IndexByte(peekBuffered(br), '\n') >= 0
			out.setHold(more)
			if code, exit := s.handle(ctx, p, line, out); exit {
				out.flush()
				return stdioEnd{code: code, exit: true}
			}
			if !more {
				out.flush()
			}
		}
		if err != nil {
			return stdioEnd{}
		}
	}
}

// peekBuffered returns what br holds already, without reading.
func peekBuffered(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// flapExit ends a stdio server's up period: nothing more is written, and
// the process exits with exitFlap.
func flapExit(out *stdioConn, up time.Duration) int {
	out.close()
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

// server is the transport-independent part: the catalogue, the faults that
// concern requests, and the notification hub. handle and dispatch may be
// called concurrently (HTTP serves requests in parallel); an answer goes to
// the output the request came with, possibly later from another goroutine.
type server struct {
	o        Options
	versions []string
	tmu      sync.Mutex
	tools    []protocol.Tool // guarded by tmu; grows with announce
	// dynamicPrompt is set while the conformance fixtures list
	// test_dynamic_prompt (test_trigger_prompt_change); guarded by tmu.
	dynamicPrompt bool

	hub     hub
	ext     extState
	tasks   taskState      // the tasks extension's tasks (conformance fixtures)
	asked   askedState     // requests this server sent its client
	calls   atomic.Int64   // tools/call received, for ExitAfter
	muted   atomic.Bool    // MuteOnCall reached: nothing is answered
	payload string         // echo's answer with Options.Payload
	wg      sync.WaitGroup // calls answered after a latency
}

// output receives the answer to a request; on the connection transports
// (stdio, WebSocket) it is the connection itself. Implementations are safe
// for concurrent use, since answers delayed by a latency arrive from other
// goroutines. They own the frames they are given.
type output interface {
	// send writes one JSON-RPC message.
	send(frame []byte)
	// sendOversize writes a response to id whose encoding is at least
	// size bytes long, without building it in memory.
	sendOversize(id protocol.ID, size int64)
	// crash writes the first half of frame, an answer the server dies
	// while writing (CrashMidResponse), and reports whether the server
	// must now exit. A connection (stdio, WebSocket) writes it at once
	// and reports true; an HTTP stream reports false, and the response
	// that writes it ends the server then.
	crash(frame []byte) bool
}

// peer is the server's view of one client: the stdio connection, a
// WebSocket, or an HTTP session. Requests of the stateless era share one
// peer that was never initialized and does not need to be.
type peer struct {
	initialized atomic.Bool // notifications/initialized received
	// conn is the connection of a connection transport (stdio,
	// WebSocket), where its subscriptions/listen streams deliver; nil for
	// the HTTP transports, which answer subscriptions/listen themselves.
	conn sink
}

// note processes a notification or response from the client.
func (p *peer) note(m *protocol.Message) {
	if m.Method == protocol.NotificationInitialized {
		p.initialized.Store(true)
	}
}

func newServer(o Options) *server {
	if o.Name == "" {
		o.Name = "mockserver"
	}
	s := &server{o: o, versions: o.Versions, payload: strings.Repeat("x", max(o.Payload, 0))}
	if len(s.versions) == 0 {
		s.versions = protocol.SupportedVersions()
	}
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(append([]string{}, required...)) // [] rather than null: strict validators reject null
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	readOnly := true
	s.tools = []protocol.Tool{
		{Name: "echo", Description: "Echoes its text argument back.", InputSchema: obj(`"text":{"type":"string"}`, "text"),
			Annotations: &protocol.ToolAnnotations{ReadOnlyHint: &readOnly, IdempotentHint: &readOnly}},
		{Name: "add", Description: "Adds two numbers.", InputSchema: obj(`"a":{"type":"number"},"b":{"type":"number"}`, "a", "b"),
			OutputSchema: obj(`"sum":{"type":"number"}`, "sum")},
		{Name: "fail", Description: "Always fails with isError.", InputSchema: obj(``)},
		{Name: "sleep", Description: "Sleeps for ms milliseconds.", InputSchema: obj(`"ms":{"type":"integer"}`, "ms")},
		{Name: "announce", Description: "Adds a tool named text and sends tools/list_changed.", InputSchema: obj(`"text":{"type":"string"}`, "text")},
	}
	if o.NotifyTool {
		s.tools = append(s.tools, protocol.Tool{Name: "notify", Description: "Sends the notification method with params to every connection.",
			InputSchema: obj(`"method":{"type":"string"},"params":{"type":"object"}`, "method")})
	}
	if o.Redescribe {
		s.tools = append(s.tools, protocol.Tool{Name: "redescribe", Description: "Changes the description of tool to text and sends tools/list_changed.",
			InputSchema: obj(`"tool":{"type":"string"},"text":{"type":"string"}`, "tool", "text")})
	}
	s.tools = append(s.tools, s.extTools()...)
	if o.Conformance {
		s.tools = append(s.tools, conformanceTools()...)
		s.tools = append(s.tools, mrtrTools()...)
		s.tools = append(s.tools, statelessTools()...)
		s.tools = append(s.tools, tasksTools()...)
	}
	for i := 1; i <= o.Tools; i++ {
		s.tools = append(s.tools, protocol.Tool{
			Name: fmt.Sprintf("tool_%03d", i), Description: "An extra tool that echoes.", InputSchema: obj(`"text":{"type":"string"}`),
		})
	}
	for i := range s.tools {
		if d, ok := o.Describe[s.tools[i].Name]; ok {
			s.tools[i].Description = d
		}
	}
	return s
}

// handle processes one frame from p; the answer, if any, goes to out. It
// reports (code, true) when the server must exit.
func (s *server) handle(ctx context.Context, p *peer, line []byte, out output) (int, bool) {
	m, err := decode(line)
	if err != nil {
		s.replyError(out, protocol.ID{}, protocol.NewError(protocol.CodeParseError, "%v", err))
		return 0, false
	}
	if s.o.Silent || s.muted.Load() || m.Kind != protocol.KindRequest {
		p.note(m)
		if m.Kind == protocol.KindNotification {
			s.extNotification(m)
			if m.Method == protocol.NotificationCancelled && p.conn != nil {
				// The client cancels a subscriptions/listen stream on a
				// connection transport by naming its request.
				var c protocol.CancelledParams
				if json.Unmarshal(m.Params, &c) == nil {
					s.hub.cancel(p.conn, c.RequestID)
				}
			}
		}
		if m.Kind == protocol.KindResponse {
			s.asked.deliver(m)
		}
		return 0, false
	}
	return s.dispatch(ctx, p, m, s.modernVersion(m.Params), out)
}

// dispatch answers request m from p to out; modern says whether m carries
// a stateless-era protocol version this server serves (modernVersion). It
// reports (code, true) when the server must exit at once. (An HTTP
// stream given a crash, see output, ends the server itself once it has
// written it.)
func (s *server) dispatch(ctx context.Context, p *peer, m *protocol.Message, modern bool, out output) (int, bool) {
	if !modern && !p.initialized.Load() && m.Method != protocol.MethodInitialize &&
		m.Method != protocol.MethodDiscover && m.Method != protocol.MethodPing {
		s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "%s before initialization", m.Method))
		return 0, false
	}
	if s.o.Conformance && s.conformanceDispatch(out, m) {
		return 0, false
	}
	if s.o.InitDelay > 0 && (m.Method == protocol.MethodDiscover || m.Method == protocol.MethodInitialize) {
		flushHeld(out)
		time.Sleep(s.o.InitDelay)
	}
	if s.extRequest(out, m) {
		return 0, false
	}
	switch m.Method {
	case protocol.MethodDiscover:
		s.discover(out, m, modern)
	case protocol.MethodInitialize:
		s.initialize(out, m)
	case protocol.MethodPing:
		s.reply(out, m.ID, json.RawMessage(`{}`))
	case protocol.MethodToolsList:
		s.tmu.Lock()
		tools := s.tools
		s.tmu.Unlock()
		page, next := paginate(tools, cursorOf(m.Params), s.o.PageSize)
		s.reply(out, m.ID, s.cacheable(m, protocol.ListToolsResult{Tools: page, NextCursor: next}))
		s.channelAtStart(out)
	case protocol.MethodToolsCall:
		n := s.calls.Add(1)
		if s.o.MuteOnCall > 0 && n >= int64(s.o.MuteOnCall) {
			s.muted.Store(true)
			fmt.Fprintf(os.Stderr, "mockserver: silent from tools/call %d on, as configured\n", n)
			return 0, false
		}
		if s.o.StallOnCall > 0 && n >= int64(s.o.StallOnCall) {
			flushHeld(out)
			fmt.Fprintf(os.Stderr, "mockserver: no longer reading input from tools/call %d on, as configured\n", n)
			for { // this goroutine reads the input: nothing is read again
				time.Sleep(time.Hour) // (a sleep, not select{}: the runtime would call that a deadlock)
			}
		}
		if s.o.ExitAfter > 0 && n > int64(s.o.ExitAfter) {
			fmt.Fprintf(os.Stderr, "mockserver: exiting after %d calls as configured\n", s.o.ExitAfter)
			return exitAfterCalls, true
		}
		if s.o.HangOnCall {
			return 0, false
		}
		if s.o.CrashMidResponse {
			return s.crashMidCall(out, m)
		}
		if s.o.Latency > 0 {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				time.Sleep(s.o.Latency)
				s.callTool(out, m)
			}()
			return 0, false
		}
		s.callTool(out, m)
	case protocol.MethodResourcesList:
		s.reply(out, m.ID, s.cacheable(m, protocol.ListResourcesResult{Resources: s.resources()}))
	case protocol.MethodResourcesTemplatesList:
		s.reply(out, m.ID, s.cacheable(m, protocol.ListResourceTemplatesResult{ResourceTemplates: []protocol.ResourceTemplate{
			{URITemplate: "mock://template/{id}", Name: "template", MimeType: "text/plain"},
		}}))
	case protocol.MethodResourcesRead:
		var p protocol.ReadResourceParams
		_ = json.Unmarshal(m.Params, &p)
		if !strings.HasPrefix(p.URI, "mock://") {
			s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidParams, "no resource %q", p.URI)) // SEP-2164
			return 0, false
		}
		s.reply(out, m.ID, s.cacheable(m, protocol.ReadResourceResult{Contents: []protocol.ResourceContents{
			{URI: p.URI, MimeType: "text/plain", Text: "contents of " + p.URI + s.versionSuffix(p.URI)},
		}}))
	case protocol.MethodPromptsList:
		s.reply(out, m.ID, s.cacheable(m, protocol.ListPromptsResult{Prompts: s.prompts()}))
	case protocol.MethodPromptsGet:
		var p protocol.GetPromptParams
		_ = json.Unmarshal(m.Params, &p)
		s.reply(out, m.ID, protocol.GetPromptResult{Description: p.Name, Messages: []protocol.PromptMessage{
			{Role: "user", Content: protocol.TextContent(fmt.Sprintf("prompt %s for %s", p.Name, p.Arguments["name"]))},
		}})
	case protocol.MethodSubscriptionsListen:
		if !modern || p.conn == nil {
			s.replyError(out, m.ID, protocol.NewError(protocol.CodeMethodNotFound, "method %q not found", m.Method))
			return 0, false
		}
		s.listen(m, p.conn)
	default:
		s.replyError(out, m.ID, protocol.NewError(protocol.CodeMethodNotFound, "method %q not found", m.Method))
	}
	_ = ctx
	return 0, false
}

// modernVersion reports whether a request carries a stateless-era
// protocol version this server serves.
func (s *server) modernVersion(params json.RawMessage) bool {
	if len(params) == 0 || !s.servesModern() {
		return false
	}
	v := requestVersion(params)
	return protocol.UsesDiscover(v) && slices.Contains(s.versions, v)
}

// servesModern reports whether the server serves the stateless era.
func (s *server) servesModern() bool { return slices.Contains(s.versions, protocol.Version20260728) }

// requestVersion returns the protocol version in a request's _meta, or "".
func requestVersion(params json.RawMessage) string {
	if v, ok := fastRequestVersion(params); ok {
		return v
	}
	var p struct {
		Meta protocol.Meta `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	p.Meta.Get(protocol.MetaProtocolVersion, &v)
	return v
}

func (s *server) capabilities() protocol.ServerCapabilities {
	c := protocol.ServerCapabilities{Tools: &protocol.ListChangedCapability{ListChanged: true}}
	if s.o.Resources > 0 {
		c.Resources = &protocol.ResourcesCapability{}
	}
	if s.o.Prompts > 0 {
		c.Prompts = &protocol.ListChangedCapability{}
	}
	if s.o.Conformance {
		logging := json.RawMessage(`{}`)
		c.Resources = &protocol.ResourcesCapability{Subscribe: true}
		c.Prompts = &protocol.ListChangedCapability{ListChanged: true}
		c.Logging = &logging
		c.Completions = &logging
		c.Extensions = map[string]json.RawMessage{
			protocol.ExtensionTasks:  json.RawMessage(`{}`),
			protocol.ExtensionSkills: json.RawMessage(`{"directoryRead":true}`),
		}
	}
	s.extCapabilities(&c)
	return c
}

func (s *server) info() protocol.Implementation {
	return protocol.Implementation{Name: s.o.Name, Version: "1.0.0"}
}

func (s *server) discover(out output, m *protocol.Message, modern bool) {
	if !s.servesModern() {
		s.replyError(out, m.ID, protocol.NewError(protocol.CodeMethodNotFound, "method %q not found", m.Method))
		return
	}
	if !modern {
		s.replyError(out, m.ID, s.unsupportedVersion(requestVersion(m.Params)))
		return
	}
	res := protocol.DiscoverResult{SupportedVersions: s.versions, Capabilities: s.capabilities(), Meta: protocol.Meta{}}
	_ = res.Meta.Set(protocol.MetaServerInfo, s.info())
	s.reply(out, m.ID, s.cacheable(m, res))
}

// unsupportedVersion is the stateless era's answer to a request for a
// version the server does not serve.
func (s *server) unsupportedVersion(requested string) *protocol.Error {
	data, _ := json.Marshal(protocol.UnsupportedProtocolVersionData{Supported: s.versions, Requested: requested})
	return &protocol.Error{Code: protocol.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version", Data: data}
}

func (s *server) initialize(out output, m *protocol.Message) {
	var p protocol.InitializeParams
	_ = json.Unmarshal(m.Params, &p)
	version := ""
	for _, v := range s.versions {
		if protocol.UsesDiscover(v) {
			continue
		}
		if v == p.ProtocolVersion {
			version = v
			break
		}
		if version == "" {
			version = v // the newest handshake version served
		}
	}
	if version == "" {
		version = protocol.LatestHandshakeVersion
	}
	s.reply(out, m.ID, protocol.InitializeResult{ProtocolVersion: version, Capabilities: s.capabilities(), ServerInfo: s.info()})
}

func (s *server) callTool(out output, m *protocol.Message) {
	var p callParams
	if err := decodeCallParams(m.Params, &p); err != nil {
		s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidParams, "%v", err))
		return
	}
	if s.o.OversizeBytes > 0 {
		out.sendOversize(m.ID, s.o.OversizeBytes)
		return
	}
	if s.o.Conformance && s.conformanceCall(out, m, p.Name) {
		return
	}
	switch {
	case isEchoTool(p.Name):
		text := p.Arguments.Text
		if s.o.Payload > 0 {
			text = s.payload
		}
		if frame, ok := appendTextResult(make([]byte, 0, 96+len(text)), m.ID, text); ok {
			out.send(frame)
			return
		}
		s.reply(out, m.ID, protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(text)}})
	case p.Name == "add":
		if p.Arguments.A == nil || p.Arguments.B == nil {
			s.reply(out, m.ID, protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("add needs a and b")}})
			return
		}
		sum := *p.Arguments.A + *p.Arguments.B
		s.reply(out, m.ID, protocol.CallToolResult{
			Content:           []protocol.Content{protocol.TextContent(strconv.FormatFloat(sum, 'g', -1, 64))},
			StructuredContent: json.RawMessage(`{"sum":` + strconv.FormatFloat(sum, 'g', -1, 64) + `}`),
		})
	case p.Name == "announce":
		s.tmu.Lock()
		s.tools = append(slices.Clip(s.tools), protocol.Tool{Name: p.Arguments.Text, Description: "Announced at run time.", InputSchema: json.RawMessage(`{"type":"object"}`)})
		s.tmu.Unlock()
		s.reply(out, m.ID, protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("announced " + p.Arguments.Text)}})
		s.hub.toolsChanged()
	case p.Name == "redescribe" && s.o.Redescribe:
		s.tmu.Lock()
		i := slices.IndexFunc(s.tools, func(t protocol.Tool) bool { return t.Name == p.Arguments.Tool })
		if i >= 0 {
			s.tools = slices.Clone(s.tools) // lists already answered keep theirs
			s.tools[i].Description = p.Arguments.Text
		}
		s.tmu.Unlock()
		if i < 0 {
			s.reply(out, m.ID, protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("no tool " + p.Arguments.Tool)}})
			return
		}
		s.reply(out, m.ID, protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("redescribed " + p.Arguments.Tool)}})
		s.hub.toolsChanged()
	case p.Name == "notify" && s.o.NotifyTool:
		s.hub.broadcast(p.Arguments.Method, p.Arguments.Params)
		s.reply(out, m.ID, protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("sent " + p.Arguments.Method)}})
	case s.extTool(out, m, p.Name):
	case p.Name == "fail":
		s.reply(out, m.ID, protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("this tool always fails")}})
	case p.Name == "sleep":
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			time.Sleep(time.Duration(p.Arguments.Ms) * time.Millisecond)
			s.reply(out, m.ID, protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("slept")}})
		}()
	default:
		s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidParams, "unknown tool %q", p.Name))
	}
}

// crashMidCall answers tools/call m the CrashMidResponse way: after the
// latency, out gets the first half of the real answer, and the server
// dies. The call is answered in the caller's goroutine (a stdio server
// reads nothing more meanwhile: it is about to die).
func (s *server) crashMidCall(out output, m *protocol.Message) (int, bool) {
	if s.o.Latency > 0 {
		flushHeld(out)
		time.Sleep(s.o.Latency)
	}
	answer := make(capture, 1)
	s.callTool(answer, m)
	frame := <-answer // the sleep tool answers from another goroutine
	fmt.Fprintln(os.Stderr, "mockserver: crashing in the middle of an answer as configured")
	if out.crash(frame) {
		return exitCrash, true
	}
	return 0, false
}

// capture is an output that keeps the one answer it is given, for
// crashMidCall.
type capture chan []byte

func (c capture) send(frame []byte) {
	select {
	case c <- frame:
	default: // a second answer: there is none
	}
}

func (c capture) sendOversize(id protocol.ID, size int64) {
	var b bytes.Buffer
	_ = writeOversize(&b, id, size)
	c.send(b.Bytes())
}

func (c capture) crash(frame []byte) bool {
	c.send(frame)
	return false
}

func (s *server) resources() []protocol.Resource {
	out := make([]protocol.Resource, s.o.Resources)
	for i := range out {
		out[i] = protocol.Resource{URI: fmt.Sprintf("mock://resource/%d", i+1), Name: fmt.Sprintf("resource %d", i+1), MimeType: "text/plain"}
	}
	return out
}

func (s *server) prompts() []protocol.Prompt {
	out := make([]protocol.Prompt, s.o.Prompts)
	for i := range out {
		out[i] = protocol.Prompt{Name: fmt.Sprintf("prompt_%d", i+1), Arguments: []protocol.PromptArgument{{Name: "name", Required: true}}}
	}
	return out
}

func cursorOf(params json.RawMessage) string {
	var p protocol.PaginatedParams
	_ = json.Unmarshal(params, &p)
	return p.Cursor
}

func paginate[T any](items []T, cursor string, size int) ([]T, string) {
	start, _ := strconv.Atoi(cursor)
	if size <= 0 || start < 0 || start > len(items) {
		if start > len(items) {
			start = len(items)
		}
		return items[max(start, 0):], ""
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	return items[start:end], next
}

func (s *server) reply(out output, id protocol.ID, result any) {
	frame, err := protocol.AppendResult(nil, id, result)
	if err != nil {
		s.replyError(out, id, protocol.NewError(protocol.CodeInternalError, "%v", err))
		return
	}
	out.send(frame)
}

func (s *server) replyError(out output, id protocol.ID, e *protocol.Error) {
	frame, _ := protocol.AppendError(nil, id, e)
	out.send(frame)
}

// Garbage is what the Garbage fault writes before each message: a line
// that is not JSON and a frame cut short.
const (
	garbageLine  = "mockserver: this line is not JSON"
	garbageFrame = `{"jsonrpc":"2.0","id":`
)

// writeOversize writes a response to id of at least size bytes (no
// newline).
func writeOversize(w io.Writer, id protocol.ID, size int64) error {
	idJSON, _ := id.MarshalJSON()
	head := `{"jsonrpc":"2.0","id":` + string(idJSON) + `,"result":{"content":[{"type":"text","text":"`
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	chunk := []byte(strings.Repeat("o", 64<<10))
	for n := int64(len(head)); n < size; n += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `"}]}}`)
	return err
}

// stdioConn is the stdio transport's output and notification sink: one
// buffered writer, flushed after every message (unless held), until
// close.
//
// The serving loop holds the flush (setHold) while it has more requests
// to handle at once, and flushes after the last one, and before it
// blocks otherwise (flushHeld: a sleep of InitDelay or of a crash's
// latency), so that nothing written waits for longer than it takes to
// handle the requests already read.
type stdioConn struct {
	garbage bool
	mu      sync.Mutex
	out     *bufio.Writer // guarded by mu
	closed  bool          // guarded by mu: nothing more is written
	hold    bool          // guarded by mu: send does not flush
}

// setHold makes send flush (false) or not (true) until flush is called.
func (c *stdioConn) setHold(hold bool) {
	c.mu.Lock()
	c.hold = hold
	c.mu.Unlock()
}

// flushHeld writes what out holds back, when it is a stdioConn, before
// the serving loop blocks.
func flushHeld(out output) {
	if c, ok := out.(*stdioConn); ok {
		c.flush()
	}
}

func (c *stdioConn) send(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.garbage {
		c.out.WriteString(garbageLine + "\n")
		c.out.WriteString(garbageFrame + "\n")
	}
	c.out.Write(frame)
	c.out.WriteByte('\n')
	if !c.hold {
		c.out.Flush()
	}
}

func (c *stdioConn) notify(frame []byte) { c.send(frame) }

func (c *stdioConn) sendOversize(id protocol.ID, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	_ = writeOversize(c.out, id, size)
	c.out.WriteByte('\n')
	c.out.Flush()
}

// crash writes the first half of frame, without a newline, and closes.
func (c *stdioConn) crash(frame []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.out.Write(frame[:len(frame)/2])
		c.out.Flush()
		c.closed = true
	}
	return true
}

// flush writes what is buffered and ends the hold.
func (c *stdioConn) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = false
	if !c.closed {
		c.out.Flush()
	}
}

// close flushes what was written and stops writing.
func (c *stdioConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.out.Flush()
		c.closed = true
	}
}
