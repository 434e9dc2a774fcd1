package main

import (
	"context"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
)

func (a *app) superviseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "supervise",
		Short: "Keep the configured servers connected and log every change until SIGINT or SIGTERM",
		Long: `supervise starts every configured server and logs each state change and each
change of the tool pool to stderr until it receives SIGINT or SIGTERM. It then
shuts every server down (stdio servers: close stdin, SIGTERM, SIGKILL to the
process group) within 30 s and exits. A second signal during shutdown ends the
process at once.

Exit codes:
  0  shut down cleanly: every server process is gone
  1  the config could not be loaded (nothing is started), or the shutdown failed
  2  usage error`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.supervise(cmd.Context()) },
	}
}

func (a *app) supervise(ctx context.Context) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	cfg, err := a.loadConfig()
	if err != nil {
		a.logConfigError(err)
		return failed(nil)
	}
	sup, err := a.startSupervisor(ctx, false)
	if err != nil {
		return failed(nil)
	}

	// The event log. The channel closes when the supervisor does.
	events := sup.Subscribe(context.Background(), mcpvisor.BufferSize(1024))
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		a.logEvents(events)
	}()

	res, err := sup.SetServers(ctx, cfg.Servers)
	if err != nil {
		a.log.Error().Err(err).Msg("configuring the supervisor")
		a.closeSupervisor(sup)
		return failed(nil)
	}
	disabled := 0
	for _, sc := range cfg.Servers {
		if sc.Disabled {
			disabled++
		}
	}
	a.log.Info().Strs("files", cfg.Files).Int("servers", len(cfg.Servers)).Int("added", len(res.Added)).
		Int("disabled", disabled).Int("errors", len(res.Errors)).Msg("supervising")
	for _, name := range slices.Sorted(maps.Keys(res.Errors)) {
		a.log.Error().Str("server", name).Err(res.Errors[name]).Msg("server config rejected")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Excluded)) {
		a.log.Warn().Str("server", name).Str("reason", cfg.Excluded[name]).Msg("server excluded by policy; not started")
	}
	if len(cfg.Servers) == 0 {
		a.log.Warn().Msg("no servers configured")
	}

	// Everything supervise serves runs from here until the signal: today
	// the event log started above. The gateway (the pool as one MCP server)
	// and the admin API belong here too, given sup, and must stop before
	// sup.Close below.
	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-ctx.Done():
	}
	signal.Stop(sigs) // from now on a second signal ends the process at once

	ev := a.log.Info().Stringer("timeout", closeTimeout)
	if sig != nil {
		ev = ev.Str("signal", sig.String())
	}
	ev.Msg("shutting down")
	closeErr := a.closeSupervisor(sup)
	select {
	case <-logged:
	case <-time.After(time.Second): // Close failed; its events may never end
	}
	if closeErr != nil {
		return failed(nil)
	}
	a.log.Info().Msg("stopped")
	return nil
}

// logEvents logs every event of the stream until it closes.
func (a *app) logEvents(events <-chan mcpvisor.Event) {
	for ev := range events {
		switch ev.Type {
		case mcpvisor.EventServerState:
			e := a.log.Info().Uint64("seq", ev.Seq).Str("server", ev.Server).Str("state", string(ev.State))
			if ev.Previous != "" {
				e = e.Str("previous", string(ev.Previous))
			}
			if ev.Err != "" {
				e = e.Str("error", ev.Err)
			}
			e.Msg("server state")
		case mcpvisor.EventToolsChanged, mcpvisor.EventPromptsChanged, mcpvisor.EventResourcesChanged:
			e := a.log.Info().Uint64("seq", ev.Seq).Str("server", ev.Server)
			if ev.Diff != nil {
				e = e.Strs("added", ev.Diff.Added).Strs("removed", ev.Diff.Removed).Strs("changed", ev.Diff.Changed)
			}
			if ev.Type == mcpvisor.EventToolsChanged {
				e = e.Int("tools", ev.Tools)
			}
			e.Msg(string(ev.Type))
		case mcpvisor.EventCollision:
			c := ev.Collision
			a.log.Warn().Uint64("seq", ev.Seq).Str("kind", c.Kind).Str("name", c.Name).Str("holder", c.Holder).
				Str("server", c.Server).Str("original", c.Original).Str("renamed", c.Renamed).Msg("name collision")
		case mcpvisor.EventServerToggled:
			a.log.Info().Uint64("seq", ev.Seq).Str("server", ev.Server).Bool("off", ev.ToggledOff).Msg("server toggled")
		case mcpvisor.EventLogMessage:
			a.log.Info().Uint64("seq", ev.Seq).Str("server", ev.Server).Str("level", ev.Level).RawJSON("params", ev.Data).Msg("server log")
		case mcpvisor.EventGap:
			a.log.Warn().Uint64("seq", ev.Seq).Uint64("dropped", ev.Dropped).Str("reason", ev.GapReason).Msg("events lost")
		default:
			a.log.Debug().Uint64("seq", ev.Seq).Str("type", string(ev.Type)).Str("server", ev.Server).Msg("event")
		}
	}
}
