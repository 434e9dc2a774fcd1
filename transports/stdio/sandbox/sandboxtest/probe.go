// Package sandboxtest is a small stdio MCP server for sandbox tests: its
// tools try what a sandbox should stop (a write, a read, a TCP connection,
// a large allocation) and say whether it worked.
//
// Build compiles it (package probe below) without the race detector: a
// race-enabled binary maps terabytes of shadow memory, which no data
// limit lets start.
package sandboxtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
)

// The probe's tools.
const (
	ToolWrite   = "write"   // {path}: write a file
	ToolRead    = "read"    // {path}: read a file; the content is the answer
	ToolConnect = "connect" // {addr}: open a TCP connection
	ToolAlloc   = "alloc"   // {mb}: allocate and touch that many MiB
	ToolEnv     = "env"     // {name}: the value of an environment variable
	ToolCaps    = "caps"    // {}: the capability sets (the Cap* lines of /proc/self/status)
	ToolRaw     = "raw"     // {}: open a raw ICMP socket
	ToolUDP     = "udp"     // {addr}: send a datagram and wait for its echo
	ToolUnix    = "unix"    // {addr}: connect to a unix socket (a path, or @name for an abstract one) and read a line
	ToolSignal  = "signal"  // {pid}: send SIGCONT
	ToolUnmount = "unmount" // {path}: detach the mount there
)

// Build compiles the probe server into dir and returns its path. It
// needs the go command in PATH.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "sandbox-probe")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest/probe")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the probe server: %v: %s", err, out)
	}
	return bin, nil
}

// Command returns the config that starts the probe server bin (see
// Build), with the probe's flags:
//
//	-marker PATH     create PATH before anything else (a test checks it never ran)
//	-grandchildren   start two "sleep 1000": one a plain child, one in a session of its own
//	-tmpdir PATH     write the path of its TMPDIR to PATH, and a file in the TMPDIR
func Command(bin string, flags ...string) transports.Config {
	return transports.Config{Command: bin, Args: flags}
}

// Main runs the probe server with its arguments and returns its exit
// code.
func Main(args []string) int {
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-marker":
			if i+1 < len(args) {
				i++
				if err := os.WriteFile(args[i], []byte("ran\n"), 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "probe: marker:", err)
				}
			}
		case "-tmpdir":
			if i+1 < len(args) {
				i++
				tmp := os.Getenv("TMPDIR")
				if err := os.WriteFile(filepath.Join(tmp, "left-behind"), []byte("x\n"), 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "probe: tmpdir:", err)
				}
				if err := os.WriteFile(args[i], []byte(tmp), 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "probe: tmpdir:", err)
				}
			}
		case "-grandchildren":
			for _, setsid := range []bool{false, true} {
				cmd := exec.Command("sleep", "1000")
				cmd.SysProcAttr = sessionAttr(setsid)
				if err := cmd.Start(); err != nil {
					fmt.Fprintln(os.Stderr, "probe: grandchild:", err)
				}
			}
		}
	}
	return serve()
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Name            string          `json:"name"`
		Arguments       json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// hog keeps what alloc allocated, so that it is not collected.
var hog [][]byte

func serve() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	answer := func(id json.RawMessage, result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		out.Write(append(b, '\n'))
		out.Flush()
	}
	fail := func(id json.RawMessage, code int, msg string) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
		out.Write(append(b, '\n'))
		out.Flush()
	}
	for in.Scan() {
		var r request
		if json.Unmarshal(in.Bytes(), &r) != nil {
			continue
		}
		if len(r.ID) == 0 {
			continue // a notification
		}
		switch r.Method {
		case "initialize":
			v := r.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			answer(r.ID, map[string]any{
				"protocolVersion": v,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "sandbox-probe", "version": "1"},
			})
		case "ping":
			answer(r.ID, map[string]any{})
		case "tools/list":
			answer(r.ID, map[string]any{"tools": tools()})
		case "tools/call":
			text, ok := call(r.Params.Name, r.Params.Arguments)
			answer(r.ID, map[string]any{
				"content": []any{map[string]any{"type": "text", "text": text}},
				"isError": !ok,
			})
		default:
			fail(r.ID, -32601, "method not found: "+r.Method)
		}
	}
	return 0
}

func tools() []any {
	schema := func(prop, typ string) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{prop: map[string]any{"type": typ}}, "required": []string{prop}}
	}
	return []any{
		map[string]any{"name": ToolWrite, "description": "write a file", "inputSchema": schema("path", "string")},
		map[string]any{"name": ToolRead, "description": "read a file", "inputSchema": schema("path", "string")},
		map[string]any{"name": ToolConnect, "description": "open a TCP connection", "inputSchema": schema("addr", "string")},
		map[string]any{"name": ToolAlloc, "description": "allocate and touch memory", "inputSchema": schema("mb", "integer")},
		map[string]any{"name": ToolEnv, "description": "read an environment variable", "inputSchema": schema("name", "string")},
		map[string]any{"name": ToolCaps, "description": "the capability sets", "inputSchema": map[string]any{"type": "object"}},
		map[string]any{"name": ToolRaw, "description": "open a raw socket", "inputSchema": map[string]any{"type": "object"}},
		map[string]any{"name": ToolUDP, "description": "a UDP echo", "inputSchema": schema("addr", "string")},
		map[string]any{"name": ToolUnix, "description": "connect to a unix socket", "inputSchema": schema("addr", "string")},
		map[string]any{"name": ToolSignal, "description": "send SIGCONT", "inputSchema": schema("pid", "integer")},
		map[string]any{"name": ToolUnmount, "description": "detach a mount", "inputSchema": schema("path", "string")},
	}
}

// call runs a tool: the text says what happened; ok is false when the
// attempt failed.
func call(name string, raw json.RawMessage) (string, bool) {
	var a struct {
		Path string `json:"path"`
		Addr string `json:"addr"`
		MB   int    `json:"mb"`
		Name string `json:"name"`
		Pid  int    `json:"pid"`
	}
	_ = json.Unmarshal(raw, &a)
	switch name {
	case ToolWrite:
		if err := os.WriteFile(a.Path, []byte("written by the probe\n"), 0o644); err != nil {
			return err.Error(), false
		}
		return "wrote " + a.Path, true
	case ToolRead:
		b, err := os.ReadFile(a.Path)
		if err != nil {
			return err.Error(), false
		}
		return strings.TrimSpace(string(b)), true
	case ToolConnect:
		c, err := net.DialTimeout("tcp", a.Addr, 3*time.Second)
		if err != nil {
			return err.Error(), false
		}
		c.Close()
		return "connected to " + a.Addr, true
	case ToolAlloc:
		// The hog is kept, so a collection frees nothing; and a collection
		// that runs out of memory midway may crash the runtime (Go 1.26's
		// span queues dereference nil: SIGSEGV, 7 runs in 100) instead of
		// printing its "out of memory" report, the dying words that say a
		// data limit was hit.
		debug.SetGCPercent(-1)
		for range a.MB {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			hog = append(hog, b)
		}
		return fmt.Sprintf("allocated %d MiB", a.MB), true
	case ToolEnv:
		return os.Getenv(a.Name), true
	case ToolCaps:
		return capabilities()
	case ToolRaw:
		return rawSocket()
	case ToolUDP:
		return udpEcho(a.Addr)
	case ToolUnix:
		return unixLine(a.Addr)
	case ToolSignal:
		return signal(a.Pid)
	case ToolUnmount:
		return unmount(a.Path)
	}
	return "unknown tool " + name, false
}

// udpEcho sends a datagram to addr and waits up to 3 s for its echo.
func udpEcho(addr string) (string, bool) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err.Error(), false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err.Error(), false
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err.Error(), false
	}
	return "echo: " + string(buf[:n]), true
}

// unixLine connects to the unix socket addr (@name: an abstract one) and
// reads one line, for up to 3 s.
func unixLine(addr string) (string, bool) {
	c, err := net.DialTimeout("unix", addr, 3*time.Second)
	if err != nil {
		return err.Error(), false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err.Error(), false
	}
	return strings.TrimSpace(line), true
}
