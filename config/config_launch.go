package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/trust"
)

// What an approval covers (see docs/trust.md). An entry of an untrusted
// layer is approved in two steps:
//
//  1. as written: trust.EntryHash of its JSON. Until the user approved
//     this text, nothing of the entry is expanded or read (its envFile is
//     looked at only to list the names it sets, and only when it is a
//     regular file);
//  2. as launched: once the text is approved, the entry is expanded, the
//     file's defaults, the trusted layers' ceiling and the policies are
//     applied, its envFile is read into its env, its cwd and sandbox
//     paths are resolved to real paths and its command to the real path
//     of the executable, and every member of the result (launchOf) must
//     be what the user approved (trust.Approval.Launch). Anything that
//     differs holds the server again, and the pending entry says what
//     changed (PendingServer.LaunchChanges).
//
// launchOf walks mcpvisor.ServerConfig by reflection, so a member added later is
// covered without being named here; launchSkipped lists the only members
// it leaves out.

// LaunchApprovals is implemented by an Approvals that also checks what an
// approved entry launches (*trust.Store does). An Approvals that does not
// implement it approves an entry whatever it launches once its text is
// approved, as the CLI's --trust-project approves everything.
type LaunchApprovals interface {
	// ApprovedLaunch reports whether the approval of server in project
	// covers launch; when not, recorded is the launch it covers (nil for
	// none), to show what changed.
	ApprovedLaunch(project, server string, launch trust.Launch) (approved bool, recorded *trust.Launch, err error)
}

// ErrNotPending is returned by Config.Approval for a server that does not
// wait for approval.
var ErrNotPending = errors.New("mcpvisor: the server does not wait for approval")

// launchSkipped are the mcpvisor.ServerConfig members that never reach the server:
// NeedsApproval (set by the loader on held entries) and Scope (status
// only).
var launchSkipped = map[string]bool{"NeedsApproval": true, "Scope": true}

// launchHidden are the members whose values may hold a secret the entry
// expanded: the launch shows their digests, never the values.
var launchHidden = map[string]bool{"env": true, "headers": true, "args": true, "url": true, "oauth": true}

// launchOf returns the launch of sc, whose paths resolveLaunch resolved:
// every member of sc (by reflection) and the real path of the executable
// a stdio server runs (exe).
func launchOf(sc mcpvisor.ServerConfig, exe string) trust.Launch {
	fields := map[string]string{}
	flattenLaunch(reflect.ValueOf(sc), "", false, fields)
	if sc.Kind() == transports.TypeStdio {
		fields["executable"] = exe
	}
	return trust.NewLaunch(fields)
}

// flattenLaunch adds v's leaves to fields under their paths (JSON member
// names where the field has one). Nil pointers, slices and maps are
// fields of their own ("none"), so that none differs from empty.
func flattenLaunch(v reflect.Value, path string, hidden bool, fields map[string]string) {
	put := func(s string) {
		if hidden {
			s = trust.HiddenValue(s)
		}
		fields[path] = s
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			fields[path] = "none"
			return
		}
		fields[path] = "set"
		flattenLaunch(v.Elem(), path, hidden, fields)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || launchSkipped[f.Name] {
				continue
			}
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				flattenLaunch(v.Field(i), path, hidden, fields)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = strings.ToLower(f.Name[:1]) + f.Name[1:]
			}
			sub := name
			if path != "" {
				sub = path + "." + name
			}
			flattenLaunch(v.Field(i), sub, hidden || launchHidden[sub], fields)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage
			if v.IsNil() {
				fields[path] = "none"
				return
			}
			put(string(v.Bytes()))
			return
		}
		if v.Kind() == reflect.Slice && v.IsNil() {
			fields[path] = "none"
			return
		}
		fields[path] = fmt.Sprintf("%d items", v.Len())
		for i := range v.Len() {
			flattenLaunch(v.Index(i), path+"["+strconv.Itoa(i)+"]", hidden, fields)
		}
	case reflect.Map:
		if v.IsNil() {
			fields[path] = "none"
			return
		}
		fields[path] = fmt.Sprintf("%d members", v.Len())
		keys := v.MapKeys()
		for _, k := range keys {
			flattenLaunch(v.MapIndex(k), path+"["+strconv.Quote(fmt.Sprint(k.Interface()))+"]", hidden, fields)
		}
	default:
		put(fmt.Sprint(v.Interface()))
	}
}

// resolveLaunch resolves, in place, sc's working directory and sandbox
// paths to real paths (symbolic links followed; a path that does not
// exist yet keeps its missing tail under its nearest existing parent,
// resolved), and returns the real path of the executable a stdio server
// runs, as the stdio transport finds it: a command with a slash relative
// to the working directory, one without in PATH (lookup's). The
// confined server then gets exactly the paths approved. The slices of
// sc.Sandbox are replaced, never written through.
func resolveLaunch(sc *mcpvisor.ServerConfig, lookup func(string) (string, bool)) (exe string) {
	if sc.Kind() != transports.TypeStdio {
		return ""
	}
	sc.Cwd = realPath(sc.Cwd)
	if sb := sc.Sandbox; sb != nil {
		r := *sb
		r.Write = mapPaths(sb.Write)
		r.Read = mapPaths(sb.Read)
		sc.Sandbox = &r
	}
	return executablePath(sc.Command, sc.Cwd, lookup)
}

func mapPaths(paths []string) []string {
	if paths == nil {
		return nil
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = realPath(p)
	}
	return out
}

// realPath returns p absolute with its symbolic links resolved, as far as
// it exists ("" stays "").
func realPath(p string) string {
	if p == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	var tail []string
	for cur := abs; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			slices.Reverse(tail)
			return filepath.Join(append([]string{real}, tail...)...)
		}
		parent := filepath.Dir(cur)
		if !errors.Is(err, fs.ErrNotExist) || parent == cur {
			return abs
		}
		tail = append(tail, filepath.Base(cur))
		cur = parent
	}
}

// executablePath finds the executable the stdio transport would run for
// command, and returns its real path, or "not found: <command>".
func executablePath(command, cwd string, lookup func(string) (string, bool)) string {
	if strings.ContainsRune(command, filepath.Separator) {
		p := command
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		return realPath(p)
	}
	path, _ := lookup("PATH")
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return realPath(p)
		}
	}
	return "not found: " + command
}

// checkLaunches is the second step of approval (see above): for each
// server of an untrusted layer whose entry as written was approved, it
// resolves its paths and holds it when what it launches is not what was
// approved. It runs after the layers and policies, on what will run.
func (c *Config) checkLaunches(approvals Approvals, lookup func(string) (string, bool)) {
	for _, name := range slices.Sorted(maps.Keys(c.approvedEntries)) {
		p := c.approvedEntries[name]
		sc, ok := c.Servers[name]
		if !ok || sc.NeedsApproval != "" || sc.Disabled {
			continue
		}
		exe := resolveLaunch(&sc, lookup)
		launch := launchOf(sc, exe)
		c.Servers[name] = sc
		la, ok := approvals.(LaunchApprovals)
		if !ok {
			continue
		}
		approved, recorded, err := la.ApprovedLaunch(p.Project, name, launch)
		switch {
		case err != nil:
			p.Reason = fmt.Sprintf("%q layer entry (%s) is not approved: the approvals cannot be read: %v", p.Layer, p.File, err)
		case approved:
			continue
		default:
			p.Changed = true
			p.LaunchChanges = trust.DiffLaunch(recorded, launch)
			p.shownLaunch = launch.Digest
			var what []string
			for _, l := range p.LaunchChanges {
				k, _, _ := strings.Cut(l, ": ")
				what = append(what, k)
			}
			if recorded == nil {
				what = []string{"its approval predates launch checks"}
			}
			p.Reason = fmt.Sprintf("%q layer entry (%s) changed since it was approved: what it launches differs (%s)", p.Layer, p.File, strings.Join(what, ", "))
		}
		if sc.Kind() == transports.TypeStdio {
			p.Sandbox = sc.Sandbox
		}
		c.Servers[name] = heldConfig(&sc, p.Reason)
		c.Pending[name] = p
	}
}

// Approval returns the approval of the held server name, for
// trust.Store.Approve: its entry as written and what it launches now. It
// loads the config again as c was loaded, with this entry's text (the
// one shown in c.Pending) approved, and records the launch that load
// computes: its env files are read and its paths resolved only now that
// the user approves. It fails with ErrNotPending when name is not held,
// and with the reason when the entry (or, for one held because what it
// launches changed, that launch) changed since c was loaded, or when it
// does not load or is excluded once expanded.
func (c *Config) Approval(name string) (trust.Approval, error) {
	p, ok := c.Pending[name]
	if !ok || c.loadedWith == nil {
		return trust.Approval{}, fmt.Errorf("%w: %q", ErrNotPending, name)
	}
	opts := *c.loadedWith
	once := &approveOnce{inner: opts.Approvals, project: p.Project, server: name, hash: p.Hash}
	opts.Approvals = once
	again, err := Load(opts)
	if err != nil {
		return trust.Approval{}, err
	}
	if once.launch == nil {
		why := "its entry changed since it was shown"
		switch {
		case again.Excluded[name] != "":
			why = again.Excluded[name]
		case again.Pending[name].Reason != "" && again.Pending[name].Hash == p.Hash:
			why = again.Pending[name].Reason
		}
		for _, s := range again.Skipped {
			if s.File == p.File {
				why = fmt.Sprintf("its file does not load once the entry is expanded: %v", s.Err())
			}
		}
		return trust.Approval{}, fmt.Errorf("mcpvisor: server %q cannot be approved: %s", name, why)
	}
	if p.shownLaunch != "" && once.launch.Digest != p.shownLaunch {
		return trust.Approval{}, fmt.Errorf("mcpvisor: server %q cannot be approved: what it launches changed again since it was shown", name)
	}
	return trust.Approval{Project: p.Project, Server: name, Hash: p.Hash, Entry: p.Entry, Launch: once.launch}, nil
}

// approveOnce approves one entry text, whatever it launches, and records
// that launch; it asks inner about every other.
type approveOnce struct {
	inner                 Approvals
	project, server, hash string
	launch                *trust.Launch
}

func (a *approveOnce) Approved(project, server, hash string) (bool, bool, error) {
	if project == a.project && server == a.server && hash == a.hash {
		return true, false, nil
	}
	if a.inner == nil {
		return false, false, nil
	}
	return a.inner.Approved(project, server, hash)
}

func (a *approveOnce) ApprovedLaunch(project, server string, launch trust.Launch) (bool, *trust.Launch, error) {
	if project == a.project && server == a.server {
		a.launch = &launch
		return true, nil, nil
	}
	if la, ok := a.inner.(LaunchApprovals); ok {
		return la.ApprovedLaunch(project, server, launch)
	}
	return true, nil, nil
}
