package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ModulePath is the import path of the module this package lives in.
const ModulePath = "github.com/mcpvisor/mcpvisor/bench/peers"

// ModuleDir returns the directory of the bench/peers module's source:
// where this file was compiled from when it is still there, else the
// first directory holding the module, from the working directory up
// (itself or its bench/peers).
func ModuleDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		if dir := filepath.Dir(filepath.Dir(file)); isModuleDir(dir) {
			return dir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, d := range []string{dir, filepath.Join(dir, "bench", "peers")} {
			if isModuleDir(d) {
				return d, nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("the source of %s is neither where it was built nor above %s", ModulePath, wd)
		}
	}
}

// isModuleDir reports whether dir holds the go.mod of ModulePath.
func isModuleDir(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.TrimSpace(m) == ModulePath
		}
	}
	return false
}

// RepoRoot returns the mcpvisor repository's root: two levels above the
// module.
func RepoRoot() (string, error) {
	dir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(dir)), nil
}

// GoCommand returns the go command of the toolchain this program was built
// with when it is there, else the one in PATH.
func GoCommand() string {
	if root := runtime.GOROOT(); root != "" {
		gobin := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(gobin); err == nil {
			return gobin
		}
	}
	return "go"
}

// Binaries are the child programs the scenarios run.
type Binaries struct {
	Mock string // cmd/mockserver: mcpvisor's mock MCP server
	Echo string // cmd/echo: the bare newline-JSON and HTTP echo of the floor
}

// Build builds the child programs into dir, without -race even when this
// process has it: the servers must stay lean so that the benchmarks
// measure the clients.
func Build(dir string) (Binaries, error) {
	mod, err := ModuleDir()
	if err != nil {
		return Binaries{}, err
	}
	// The real path: processes are recognised by /proc/<pid>/exe.
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	b := Binaries{Mock: filepath.Join(dir, "mockserver"), Echo: filepath.Join(dir, "echo")}
	for _, t := range []struct{ out, pkg string }{{b.Mock, "./cmd/mockserver"}, {b.Echo, "./cmd/echo"}} {
		cmd := exec.Command(GoCommand(), "build", "-o", t.out, t.pkg)
		cmd.Dir = mod
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return Binaries{}, errors.Join(fmt.Errorf("building %s: %w", t.pkg, err), errors.New(strings.TrimSpace(out.String())))
		}
	}
	return b, nil
}
