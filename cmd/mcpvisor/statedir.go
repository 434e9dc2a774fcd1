package main

import (
	"os"

	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/trust"
)

// envStateDir names the state directory when --state-dir is not given.
const envStateDir = "MCPVISOR_STATE_DIR"

// stateDirPath is the directory of the user's trust decisions: --state-dir,
// else $MCPVISOR_STATE_DIR, else config.DefaultStateDir.
func (a *app) stateDirPath() (string, error) {
	if a.stateDir != "" {
		return a.stateDir, nil
	}
	if d := os.Getenv(envStateDir); d != "" {
		return d, nil
	}
	return config.DefaultStateDir()
}

// trustStore returns the store of the state directory, or nil (logged
// once) when there is none: then no approval is known, so project servers
// stay held, and tools are not pinned.
func (a *app) trustStore() *trust.Store {
	if a.approvals != nil || a.approvalsTried {
		return a.approvals
	}
	a.approvalsTried = true
	dir, err := a.stateDirPath()
	if err != nil {
		a.log.Warn().Err(err).Msg("no state directory: project servers stay held, tool definitions are not pinned")
		return nil
	}
	a.approvals = trust.NewStore(dir, nil)
	return a.approvals
}

// approveEverything approves every entry of the project's config files
// (--trust-project).
type approveEverything struct{}

func (approveEverything) Approved(string, string, string) (bool, bool, error) {
	return true, false, nil
}
