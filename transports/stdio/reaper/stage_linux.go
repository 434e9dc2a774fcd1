package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
)

// stageError is what the exec stage writes to its status pipe when it
// cannot become the server.
type stageError struct {
	Kind  string `json:"kind,omitempty"` // "sandbox": the sandbox could not be had
	Errno int    `json:"errno,omitempty"`
	Err   string `json:"error"`
}

// kindSandbox marks a failure of the sandbox itself.
const kindSandbox = "sandbox"

// runExecStage is the exec stage: descriptor 3 is its status pipe (closed
// by the exec when it succeeds), args[0] the sandbox.Plan in JSON.
func runExecStage(args []string) int {
	runtime.LockOSThread() // Landlock restricts this thread, which then executes the server
	status := os.NewFile(3, "status")
	if status == nil {
		fmt.Fprintf(os.Stderr, "%s %s: not started by mcpvisor\n", helperArg0, modeExec)
		return 2
	}
	syscall.CloseOnExec(3)
	report := func(e stageError) int {
		b, _ := json.Marshal(e)
		status.Write(b)
		return 127
	}
	if len(args) != 1 {
		return report(stageError{Kind: kindSandbox, Err: fmt.Sprintf("the exec stage takes one argument, got %d", len(args))})
	}
	var plan sandbox.Plan
	if err := json.Unmarshal([]byte(args[0]), &plan); err != nil {
		return report(stageError{Kind: kindSandbox, Err: "the exec stage's plan: " + err.Error()})
	}
	err := sandbox.Enter(&plan, os.Environ())
	e := stageError{Err: err.Error()}
	if errors.Is(err, sandbox.ErrUnavailable) {
		e.Kind = kindSandbox
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		e.Errno = int(errno)
	}
	return report(e)
}
