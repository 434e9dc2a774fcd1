// Command capture records the tools/list of real MCP servers over stdio, for
// the tool-search benchmark in bench/search.
//
// It reads a JSON list of servers (name, package, version, command, args,
// env), starts each one, performs initialize → notifications/initialized →
// tools/list (following nextCursor), and writes one JSON file per server into
// the output directory: the server's name, package@version, serverInfo,
// instructions and tools exactly as the server listed them.
//
// It is a tool for refreshing bench/search/testdata, not part of the test
// suite; the servers must be installed beforehand (npm install into a scratch
// directory). Env values in the list must be dummies: capture only needs a
// server to start and list its tools, never to reach a service.
//
//	go run ./bench/search/capture -servers servers.json -out bench/search/testdata
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// spec is one server to capture.
type spec struct {
	Name    string            `json:"name"`
	Package string            `json:"package"`
	Version string            `json:"version"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Dir     string            `json:"dir"`
}

// capture is the file written per server (the schema bench/search loads).
type capture struct {
	Name         string            `json:"name"`
	Package      string            `json:"package"`
	ServerInfo   json.RawMessage   `json:"serverInfo"`
	Instructions string            `json:"instructions,omitempty"`
	Tools        []json.RawMessage `json:"tools"`
}

func main() {
	servers := flag.String("servers", "servers.json", "JSON list of servers to capture")
	out := flag.String("out", "bench/search/testdata", "directory for the captured files")
	root := flag.String("root", ".", "directory the servers' dir fields are relative to (the npm install)")
	only := flag.String("only", "", "capture only the server with this name")
	timeout := flag.Duration("timeout", 60*time.Second, "time allowed per server")
	flag.Parse()

	raw, err := os.ReadFile(*servers)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var specs []spec
	if err := json.Unmarshal(raw, &specs); err != nil {
		fmt.Fprintln(os.Stderr, "servers:", err)
		os.Exit(2)
	}
	failed := 0
	for _, s := range specs {
		if *only != "" && s.Name != *only {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		s.Dir = filepath.Join(*root, s.Dir)
		c, err := captureToFile(ctx, s, *out)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
			failed++
			continue
		}
		fmt.Printf("%s\t%s\t%d tools\n", s.Name, c.Package, len(c.Tools))
	}
	if failed > 0 {
		os.Exit(1)
	}
}

// captureToFile captures s and writes it as dir/<name>.json.
func captureToFile(ctx context.Context, s spec, dir string) (*capture, error) {
	c, err := captureOne(ctx, s)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return c, os.WriteFile(filepath.Join(dir, s.Name+".json"), append(b, '\n'), 0o644)
}

// rpcMessage is a JSON-RPC message as read from a server.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// captureOne runs one server and lists its tools. The server's process is
// killed when ctx ends or the capture is done.
func captureOne(ctx context.Context, s spec) (*capture, error) {
	cmd := exec.CommandContext(ctx, s.Command, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = io.Discard
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()

	msgs := make(chan rpcMessage)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "{") {
				continue // some servers print banners on stdout
			}
			var m rpcMessage
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
		readErr <- fmt.Errorf("server closed stdout: %v", sc.Err())
	}()

	nextID := 0
	call := func(method string, params any) (json.RawMessage, error) {
		nextID++
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nextID, "method": method, "params": params})
		if _, err := stdin.Write(append(req, '\n')); err != nil {
			return nil, err
		}
		want := fmt.Sprint(nextID)
		for {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%s: %w", method, ctx.Err())
			case err := <-readErr:
				return nil, fmt.Errorf("%s: %w", method, err)
			case m := <-msgs:
				if m.Method != "" {
					if len(m.ID) > 0 { // a request from the server: answer with an empty result
						resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{}})
						_, _ = stdin.Write(append(resp, '\n'))
					}
					continue
				}
				if string(m.ID) != want {
					continue
				}
				if m.Error != nil {
					return nil, fmt.Errorf("%s: error %d: %s", method, m.Error.Code, m.Error.Message)
				}
				return m.Result, nil
			}
		}
	}

	initRes, err := call("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mcpvisor-search-capture", "version": "1"},
	})
	if err != nil {
		return nil, err
	}
	var init struct {
		ServerInfo   json.RawMessage `json:"serverInfo"`
		Instructions string          `json:"instructions"`
	}
	if err := json.Unmarshal(initRes, &init); err != nil {
		return nil, fmt.Errorf("initialize result: %w", err)
	}
	note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if _, err := stdin.Write(append(note, '\n')); err != nil {
		return nil, err
	}
	c := &capture{Name: s.Name, Package: s.Package + "@" + s.Version, ServerInfo: init.ServerInfo, Instructions: init.Instructions}
	cursor := ""
	for page := 0; ; page++ {
		if page > 100 {
			return nil, errors.New("tools/list: more than 100 pages")
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := call("tools/list", params)
		if err != nil {
			return nil, err
		}
		var lr struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &lr); err != nil {
			return nil, fmt.Errorf("tools/list result: %w", err)
		}
		c.Tools = append(c.Tools, lr.Tools...)
		if lr.NextCursor == "" {
			break
		}
		cursor = lr.NextCursor
	}
	if len(c.Tools) == 0 {
		return nil, errors.New("tools/list: no tools")
	}
	return c, nil
}
