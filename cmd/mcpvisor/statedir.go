package main

import (
	"os"

	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/trust"
)

// envStateDir names the state directory when --state-dir is not given.
const envStateDir = "MCPVISOR_STATE_DIR"

// stateDir is the state directory (--state-dir): the user's approvals
// and tool pins (the trust store, opened once), config edit locks and the
// discovery cache. Owned by cobra's goroutine (see app).
type stateDir struct {
	dir string // --state-dir
	out *output

	approvals      *trust.Store // see trustStore
	approvalsTried bool
}

// path is the directory of the user's trust decisions: --state-dir,
// else $MCPVISOR_STATE_DIR, else config.DefaultStateDir.
func (s *stateDir) path() (string, error) {
	if s.dir != "" {
		return s.dir, nil
	}
	if d := os.Getenv(envStateDir); d != "" {
		return d, nil
	}
	return config.DefaultStateDir()
}

// trustStore returns the store of the state directory, or nil (logged
// once) when there is none: then no approval is known, so project servers
// stay held, and tools are not pinned.
func (s *stateDir) trustStore() *trust.Store {
	if s.approvals != nil || s.approvalsTried {
		return s.approvals
	}
	s.approvalsTried = true
	dir, err := s.path()
	if err != nil {
		s.out.log.Warn().Err(err).Msg("no state directory: project servers stay held, tool definitions are not pinned")
		return nil
	}
	s.approvals = trust.NewStore(dir, nil)
	return s.approvals
}

// approveEverything approves every entry of the project's config files
// (--trust-project).
type approveEverything struct{}

func (approveEverything) Approved(string, string, string) (bool, bool, error) {
	return true, false, nil
}
