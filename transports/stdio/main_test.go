//go:build !windows

package stdio

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
)

// TestMain serves the process helper when this test binary is started as
// one (the reaper and exec stages that start the servers of these tests).
func TestMain(m *testing.M) {
	reaper.HelperMain()
	goleak.VerifyTestMain(m)
}
