package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/config"
)

// What the loader makes of one server entry of one file: the status add
// and get report. It comes from the config files and the recorded
// approvals only; nothing is started or contacted.
const (
	entryEnabled       = "enabled"        // loaded: a supervisor starts it (a lazy one on first use)
	entryDisabled      = "disabled"       // loaded with "disabled": true
	entryNeedsApproval = "needs-approval" // a project or local entry not approved as written
	entryOverridden    = "overridden"     // a higher layer's entry of the same name is used instead
	entryExcluded      = "excluded"       // a managed policy keeps it from running
	entryNotLoaded     = "not-loaded"     // its file is not read (the managed file is exclusive)
	entryInvalid       = "invalid"        // the loader rejects the entry
	entryConfigError   = "config-error"   // the configuration does not load, for another reason
)

// entryState is the status of one entry.
type entryState struct {
	Status string
	Reason string // why, for every status but enabled and disabled
	// Pending is what to approve, with entryNeedsApproval.
	Pending *config.PendingServer
}

// loadForState loads the configuration as the other commands do, with
// the recorded approvals (and never --trust-project's blanket one: the
// status says what a plain run would do).
func (c *configFiles) loadForState() (*config.Config, error) {
	opts := config.Options{Files: c.files}
	if store := c.state.trustStore(); store != nil {
		opts.Approvals = store
	}
	return config.Load(opts)
}

// stateOf is the status of the entry of server name in file, given what
// the loader returned.
func stateOf(cfg *config.Config, loadErr error, name string, file scopeFile, mapName string) entryState {
	if loadErr != nil {
		if reason, ok := entryProblems(splitErrors(loadErr), file, mapName, name); ok {
			return entryState{Status: entryInvalid, Reason: reason}
		}
		return entryState{Status: entryConfigError, Reason: "the configuration does not load: " + loadErr.Error()}
	}
	for _, sk := range cfg.Skipped {
		if !samePath(sk.File, file.path) {
			continue
		}
		if reason, ok := entryProblems(splitErrors(sk.Err()), file, mapName, name); ok {
			return entryState{Status: entryInvalid, Reason: reason + " (the whole file is skipped)"}
		}
		return entryState{Status: entryConfigError, Reason: "its file is skipped, it does not load: " + sk.Err().Error()}
	}
	if reason, ok := cfg.Excluded[name]; ok {
		return entryState{Status: entryExcluded, Reason: reason}
	}
	src, ok := cfg.Sources[name]
	switch {
	case !ok && file.scope != scopeManaged:
		if m, ok := managedScope(); ok {
			return entryState{Status: entryNotLoaded, Reason: fmt.Sprintf("the managed file %s holds servers: it is the only file read", m.path)}
		}
		return entryState{Status: entryNotLoaded, Reason: "the loader did not read it"}
	case !ok:
		return entryState{Status: entryNotLoaded, Reason: "the loader did not read it"}
	case !samePath(src, file.path):
		return entryState{Status: entryOverridden, Reason: fmt.Sprintf("the %s entry (%s) is used instead", cfg.Layers[name], src)}
	}
	if p, ok := cfg.Pending[name]; ok {
		return entryState{Status: entryNeedsApproval, Reason: p.Reason, Pending: &p}
	}
	if cfg.Servers[name].Disabled {
		return entryState{Status: entryDisabled}
	}
	return entryState{Status: entryEnabled}
}

// entryProblems joins the messages of the *ConfigErrors among errs that
// point into the entry of server name in file; ok is false when none do.
func entryProblems(errs []error, file scopeFile, mapName, name string) (reason string, ok bool) {
	var mine []string
	for _, e := range errs {
		var ce *config.Error
		if errors.As(e, &ce) && samePath(ce.File, file.path) && entryError(ce.Path, mapName, name) {
			mine = append(mine, ce.Err.Error())
		}
	}
	return strings.Join(mine, "; "), len(mine) > 0
}

// splitErrors undoes errors.Join.
func splitErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// entryError reports whether a *ConfigError path points into the entry
// of server name (the loader writes mcpServers.name, or
// mcpServers["odd name"] for names that are not plain).
func entryError(path, mapName, name string) bool {
	plain := name != ""
	for _, c := range name {
		if !(c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			plain = false
			break
		}
	}
	key := mapName + "." + name
	if !plain {
		key = mapName + "[" + strconv.Quote(name) + "]"
	}
	return path == key || strings.HasPrefix(path, key+".") || strings.HasPrefix(path, key+"[")
}

// samePath reports whether two names of a file name the same path.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}
