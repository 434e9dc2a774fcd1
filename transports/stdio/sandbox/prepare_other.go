//go:build !linux && !darwin

package sandbox

import (
	"errors"
	"runtime"

	"github.com/mcpvisor/mcpvisor/transports"
)

func platformMechanisms() []transports.SandboxMechanism { return nil }

func platformName() string { return runtime.GOOS }

func check(m transports.SandboxMechanism, cfg *transports.Sandbox, opts *Options) error {
	return errors.New("not supported on " + runtime.GOOS)
}

func build(plan *Plan, v view, cfg *transports.Sandbox, cmd Command, opts *Options) error {
	return errors.New("sandbox: not supported on " + runtime.GOOS)
}
