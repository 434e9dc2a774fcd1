package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// benchModule is where the benchmark runner lives, relative to the
// repository's root: a nested module, so that its peers (go-sdk, mcp-go)
// and its plotting library are never dependencies of mcpvisor. This
// binary does not import it: it builds it with the Go toolchain and runs
// it.
const benchModule = "bench/peers"

// benchCmd is `mcpvisor bench`.
type benchCmd struct{ *app }

func (a benchCmd) command() *cobra.Command {
	return &cobra.Command{
		Use:   "bench [flags]",
		Short: "Run the benchmarks against mock servers, side by side with the other Go MCP clients (needs Go and the source tree)",
		Long: `bench runs the benchmark runner of mcpvisor's source tree (bench/peers/cmd/bench):
it builds it with the Go toolchain in PATH and runs it with the flags given.
'mcpvisor bench -h' lists them; 'mcpvisor bench -quick' is 'make bench'.`,
		DisableFlagParsing: true, // the flags are the runner's own
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := sourceRoot()
			if err != nil {
				return failed(err)
			}
			gobin, err := exec.LookPath("go")
			if err != nil {
				return failed(fmt.Errorf("bench builds its runner with the Go toolchain, and there is no go in PATH: %w", err))
			}
			tmp, err := os.MkdirTemp("", "mcpvisor-bench-")
			if err != nil {
				return failed(err)
			}
			defer os.RemoveAll(tmp)
			bin := filepath.Join(tmp, "bench")
			build := exec.Command(gobin, "build", "-o", bin, "./cmd/bench")
			build.Dir = filepath.Join(root, benchModule)
			build.Stdout, build.Stderr = cmd.ErrOrStderr(), cmd.ErrOrStderr()
			if err := build.Run(); err != nil {
				return failed(fmt.Errorf("building the runner in %s: %w", build.Dir, err))
			}
			wd, _ := os.Getwd()
			run := exec.Command(bin, args...)
			run.Dir = build.Dir
			run.Env = append(os.Environ(), "MCPVISOR_BENCH_WD="+wd) // a relative -out is the caller's
			run.Stdin, run.Stdout, run.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := run.Start(); err != nil {
				return failed(err)
			}
			// The runner stops at SIGINT or SIGTERM and still writes what it
			// has: pass them on and wait for it.
			signals := make(chan os.Signal, 2)
			signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(signals)
			go func() {
				for s := range signals {
					_ = run.Process.Signal(s)
				}
			}()
			if err := run.Wait(); err != nil {
				var exit *exec.ExitError
				if errors.As(err, &exit) && exit.ExitCode() > 0 {
					return &exitError{code: exit.ExitCode()} // the runner has reported it
				}
				return failed(err)
			}
			return nil
		},
	}
}

// sourceRoot finds mcpvisor's source tree: above this binary (bin/mcpvisor
// of a checkout), else above the working directory.
func sourceRoot() (string, error) {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for ; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, benchModule, "cmd", "bench", "main.go")); err == nil {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("bench runs the benchmark runner of mcpvisor's source tree (%s), found neither above this binary nor above the working directory: run it from a checkout", benchModule)
}
