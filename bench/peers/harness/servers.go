package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ScenarioServers: echo calls over stdio, sequential and with calls in
// flight, from every client to servers no one here wrote — one built with
// the official Go SDK (testdata/gosdkserver) and the reference
// server-everything (npm) — beside mcpvisor's own mock, so that a
// published ratio between clients does not rest on the mock being fast.
const ScenarioServers = "servers"

// The servers of the servers scenario.
const (
	ServerMock       = "mock"              // bench/mockserver: this project's
	ServerGoSDK      = "gosdkserver"       // testdata/gosdkserver: the official Go SDK's server
	ServerEverything = "server-everything" // @modelcontextprotocol/server-everything: the TypeScript SDK's
)

// ServerCallResult is one batch of the servers scenario: a client's calls
// to one kind of server.
type ServerCallResult struct {
	Server string `json:"server"`
	CallResult
}

// stdioServer is one server of the servers scenario: how to start it,
// and what its echo tool takes and answers.
type stdioServer struct {
	name     string
	cmd      Command // EchoArgs set
	want     string  // the echo's answer
	describe string  // for the report
}

// everythingScript is where `make deps` installs server-everything,
// relative to the repository.
const everythingScript = ".deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// foreignServers are the servers of the scenario this machine can run: the
// mock, gosdkserver (built into dir), and server-everything (cfg's
// command, else node and the repository's npm install). A server that
// cannot be had is a note, not an error.
func (r *runner) foreignServers(dir string) []stdioServer {
	out := []stdioServer{{name: ServerMock, cmd: Command{Path: r.bins.Mock, EchoArgs: EchoArgs}, want: EchoText, describe: "bench/mockserver"}}
	if bin, err := BuildGoSDKServer(dir); err != nil {
		r.note("servers: gosdkserver was not measured: %v", err)
	} else {
		out = append(out, stdioServer{name: ServerGoSDK, cmd: Command{Path: bin, EchoArgs: EchoArgs}, want: EchoText,
			describe: "testdata/gosdkserver (go-sdk's mcp.Server, stdio)"})
	}
	cmd, err := r.everythingCommand()
	if err != nil {
		r.note("servers: server-everything was not measured: %v", err)
		return out
	}
	msg, _ := json.Marshal(map[string]string{"message": EchoText})
	cmd.EchoArgs = msg
	return append(out, stdioServer{name: ServerEverything, cmd: cmd, want: "Echo: " + EchoText,
		describe: "`" + strings.Join(append([]string{filepath.Base(cmd.Path)}, cmd.Args...), " ") + "`"})
}

// everythingCommand is server-everything's command line over stdio.
func (r *runner) everythingCommand() (Command, error) {
	if c := r.cfg.EverythingServer; len(c) > 0 {
		path, err := exec.LookPath(c[0])
		if err != nil {
			return Command{}, err
		}
		return Command{Path: realPath(path), Args: c[1:]}, nil
	}
	repo, err := RepoRoot()
	if err != nil {
		return Command{}, err
	}
	script := filepath.Join(repo, everythingScript)
	if _, err := os.Stat(script); err != nil {
		return Command{}, fmt.Errorf("%w (make deps installs it)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return Command{}, err
	}
	return Command{Path: realPath(node), Args: []string{script, "stdio"}}, nil
}

// realPath resolves symbolic links, so that the server process is found
// by its /proc/<pid>/exe (see Children).
func realPath(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return path
}

// BuildGoSDKServer builds testdata/gosdkserver (a module of its own) into
// dir and returns the binary's path.
func BuildGoSDKServer(dir string) (string, error) {
	repo, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(realPath(dir), "gosdkserver")
	cmd := exec.Command(GoCommand(), "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(repo, "testdata", "gosdkserver")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", errors.Join(fmt.Errorf("building testdata/gosdkserver: %w", err), errors.New(strings.TrimSpace(out.String())))
	}
	return bin, nil
}

// serversScenario measures every client against every server, one server
// at a time; the clients of a server and level take turns (interleaved).
func (r *runner) serversScenario(ctx context.Context) {
	set := r.cfg.ServerCalls
	servers := r.foreignServers(filepath.Dir(r.bins.Mock))
	eras := set.Eras
	if len(eras) == 0 {
		eras = []string{EraLegacy}
	}
	r.prog.Begin(ScenarioServers, len(servers)*len(eras)*len(r.cfg.Clients)*len(set.InFlight))
	n := len(r.res.Servers)
	for _, srv := range servers {
		for _, era := range eras {
			if ctx.Err() != nil {
				break
			}
			var cs []*contender
			for _, name := range r.cfg.Clients {
				p, _ := PeerByName(name)
				cs = append(cs, r.connectToServer(ctx, p, srv, era))
			}
			for _, res := range r.interleaved(ctx, set, cs) {
				r.res.Servers = append(r.res.Servers, ServerCallResult{Server: srv.name, CallResult: res})
			}
			for _, c := range cs {
				if c.close != nil {
					// A server that does not exit when its stdin closes
					// (server-everything keeps timers running) is
					// stopped by the client with a signal, and go-sdk's
					// Close reports how it ended: the process is gone,
					// which is all this scenario asks of a close.
					var exit *exec.ExitError
					if err := c.close(); err != nil && !errors.As(err, &exit) {
						r.fail("%s %s: close: %v", c.base.Client, srv.name, err)
					}
				}
			}
		}
	}
	r.prog.End("%d batches", len(r.res.Servers)-n)
}

// connectToServer connects client p over stdio to a process of srv of
// its own, pinned to era (EraModern: the newest both sides speak).
func (r *runner) connectToServer(ctx context.Context, p Peer, srv stdioServer, era string) *contender {
	c := &contender{base: CallResult{Client: p.Name, Transport: TransportStdio, Era: era, PayloadBytes: len(srv.want)}}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	before := Children(srv.cmd.Path)
	s, err := p.Connect(cctx, srv.cmd, era)
	if err == nil {
		for _, pid := range Children(srv.cmd.Path) {
			if !slices.Contains(before, pid) {
				c.pid = pid
			}
		}
		if want := WantVersion[era]; era != EraModern && s.Version() != want {
			err = errors.Join(fmt.Errorf("negotiated %q, want %q", s.Version(), want), s.Close())
		}
	}
	if err != nil {
		c.err = r.fail("%s %s %s: connect: %v", p.Name, srv.name, era, err)
		return c
	}
	c.base.Version = s.Version()
	c.call = EchoCall(s, srv.want)
	c.close = s.Close
	return c
}

// writeServers writes the servers scenario's table.
func writeServers(b *strings.Builder, res *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Calls against servers no one here wrote (stdio)\n\n")
	w("The same echo round trip from every client to %s (the official Go SDK's server, `echo` → the text) and %s (the TypeScript SDK's reference server, `echo` → \"Echo: \" and the text), ",
		"`testdata/gosdkserver`", "`@modelcontextprotocol/server-everything`")
	w("beside the mock, each server a process of its own per client; the clients of a server and level take turns. ")
	w("Client CPU per call is this process's (getrusage), server CPU the server process's (/proc). ")
	w("The last two columns compare mcpvisor with the faster (leaner) of the other two clients against the same server.\n\n")
	w("| server | version | in flight | client | calls/s | p50 µs | p99 µs | client CPU/call µs | server CPU/call µs | calls/s ÷ faster peer | CPU/call ÷ leaner peer |\n")
	w("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := slices.Clone(res.Servers)
	order := map[string]int{ServerMock: 0, ServerGoSDK: 1, ServerEverything: 2}
	slices.SortStableFunc(rows, func(a, b ServerCallResult) int {
		if d := order[a.Server] - order[b.Server]; d != 0 {
			return d
		}
		if d := strings.Compare(a.Era, b.Era); d != 0 {
			return d
		}
		if d := a.InFlight - b.InFlight; d != 0 {
			return d
		}
		return clientOrder(a.Client) - clientOrder(b.Client)
	})
	for _, s := range rows {
		if s.Error != "" {
			w("| %s | %s | %d | %s | error: %s | | | | | | |\n", s.Server, eraName(s.Era), s.InFlight, s.Client, oneLine(s.Error))
			continue
		}
		fasterRatio, leanerRatio := "", ""
		if s.Client == Mcpvisor {
			var fastest, leanest float64
			for _, o := range rows {
				if o.Server == s.Server && o.Era == s.Era && o.InFlight == s.InFlight && o.Client != Mcpvisor && o.Error == "" && o.Calls > 0 {
					fastest = max(fastest, o.CallsPerSec)
					if leanest == 0 || o.CPUPerCallUs < leanest {
						leanest = o.CPUPerCallUs
					}
				}
			}
			fasterRatio, leanerRatio = ratio(s.CallsPerSec, fastest), ratio(s.CPUPerCallUs, leanest)
		}
		w("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Server, s.Version, s.InFlight, s.Client,
			thousands(s.CallsPerSec), f1(s.P50Us), f1(s.P99Us), f1(s.CPUPerCallUs), f1(s.ServerCPUPerCallUs), fasterRatio, leanerRatio)
	}
	w("\n")
}
