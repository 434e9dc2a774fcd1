package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor/cmd/mcpvisor/internal/mcpfile"
	"github.com/mcpvisor/mcpvisor/transports"
)

// addFlags are the flags of mcpvisor add.
type addFlags struct {
	scope     string
	transport string
	env       []string // KEY=VALUE
	headers   []string // "Name: value"
	approve   bool
}

// addCmd is `mcpvisor add`: it writes a server entry to a config file.
// It runs in cobra's goroutine.
type addCmd struct{ *app }

func (a addCmd) command() *cobra.Command {
	var fl addFlags
	cmd := &cobra.Command{
		Use:   "add [flags] NAME COMMAND_OR_URL [-- ARGS...]",
		Short: "Add a server to a config file, as `claude mcp add` does",
		Long: `add writes a server entry into one config file, as 'claude mcp add' does:

  mcpvisor add [--scope local|project|user] NAME -- COMMAND [ARGS...]
  mcpvisor add --transport ` + remoteKindAlternatives() + ` [-H "Name: value"]... NAME URL

The scope picks the file (default local):
  local    ./.mcp.local.json   yours, in this project (untrusted: needs approval)
  project  ./.mcp.json         shared with the project (untrusted: needs approval)
  user     ~/.mcp.json         yours, in every project
With --config FILE (one) the entry goes into FILE instead.

Options come before NAME; '--' ends them, so that the server's own flags
(npx -y, --port) are its arguments. -e and -H repeat. The transport is stdio
unless --transport says otherwise (a URL given without it is taken as a
command, with a warning, as claude does). Names are letters, digits, '-' and
'_'. The entry is written as given: ${VAR} references are expanded when the
config is loaded, not now.

The file is edited in place: the entry goes after the last server, in the
file's own style, and every other byte stays as it was. The write is atomic
(a temporary file renamed over it, with the file's mode; a new file is 0600,
0644 for a project's .mcp.json). A name the file already has is an error:
remove it first.

Servers of the local and project files start only once you approve their
entry ('mcpvisor trust'); --approve records that approval now, as 'trust'
would.

Exit codes:
  0  added
  1  the name exists in that file, the file cannot be read or written, or
     --approve could not record the approval
  2  usage error`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.add(cmd.Context(), fl, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&fl.scope, "scope", "s", "", "`SCOPE`: local (./.mcp.local.json), project (./.mcp.json) or user (~/.mcp.json); default local")
	f.StringVarP(&fl.transport, "transport", "t", "", "`TRANSPORT`: "+string(transports.TypeStdio)+" (default), "+transports.KindList(addableKinds(true)))
	f.StringArrayVarP(&fl.env, "env", "e", nil, "set an environment variable of a stdio server, `KEY=VALUE` (repeatable)")
	f.StringArrayVarP(&fl.headers, "header", "H", nil, "send an HTTP header to a remote server, `\"Name: value\"` (repeatable)")
	f.BoolVar(&fl.approve, "approve", false, "approve the entry now (local and project scopes), as 'mcpvisor trust' would")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("%v (put the server's command and its arguments after --: mcpvisor add NAME -- COMMAND ARGS...)", err)
	})
	return cmd
}

// addedEntry is the entry add writes, with the members in the order
// claude writes them.
type addedEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

func (a addCmd) add(ctx context.Context, fl addFlags, args []string) error {
	if a.configs.trustProject {
		return usageError("--trust-project approves for one run and records nothing; add --approve records the approval")
	}
	if len(args) < 2 {
		return usageError("add needs NAME and COMMAND_OR_URL (got %d argument(s)); e.g. mcpvisor add NAME -- npx -y PACKAGE", len(args))
	}
	name := args[0]
	if !plainName(name) {
		return usageError("invalid name %q: names are letters, digits, '-' and '_'", name)
	}
	entry, err := newEntry(fl, args[1], args[2:])
	if err != nil {
		return err
	}
	if entry.Command != "" && fl.transport == "" && looksLikeURL(entry.Command) {
		a.log.Warn().Str("command", entry.Command).Msg("this looks like a URL, but no --transport was given: it is added as a stdio command (use --transport " + transports.KindList(addableKinds(true)) + " for a remote server)")
	}
	s, err := a.configs.scopeByName(fl.scope)
	if err != nil {
		return err
	}

	written, data, err := a.configs.edit(ctx, s, func(f *mcpfile.File) ([]byte, error) { return f.Add(name, entry) })
	if errors.Is(err, mcpfile.ErrExists) {
		return failed(fmt.Errorf("MCP server %q already exists in the %s config (%s): remove it first (mcpvisor remove %s%s)",
			name, s.scope, s.path, name, scopeFlag(s)))
	}
	if err != nil {
		return failed(fmt.Errorf("%s: %w", s.path, err))
	}

	what := "command: " + strings.Join(append([]string{entry.Command}, entry.Args...), " ")
	if entry.Command == "" {
		what = "URL: " + entry.URL
	}
	fmt.Fprintf(a.stdout, "Added %s MCP server %q with %s to the %s config\n", transportLabel(entry.Type), name, what, s.scope)
	fmt.Fprintf(a.stdout, "File modified: %s\n", written)
	var mine []byte // the entry as written, which is all --approve may approve
	if f, err := mcpfile.Parse(data); err == nil {
		mine, _ = f.Entry(name)
	}
	return a.reportAdded(ctx, name, s, mine, fl.approve)
}

// reportAdded says what the loader makes of the entry just added, and
// records its approval when asked to: the approval of mine, the entry as
// add wrote it, and of nothing else (should the file have changed since).
func (a addCmd) reportAdded(ctx context.Context, name string, s scopeFile, mine []byte, approve bool) error {
	mapName := mcpfile.MapMCPServers
	if scopes, err := a.configs.editableScopes(); err == nil {
		defs, _ := a.configs.definitionsOf(name, scopes)
		for _, d := range defs {
			if samePath(d.path, s.path) {
				mapName = d.file.MapName()
				break
			}
			fmt.Fprintf(a.stdout, "It takes precedence over the entry of the %s config (%s).\n", d.scope, d.path)
		}
	}
	cfg, loadErr := a.configs.loadForState()
	st := stateOf(cfg, loadErr, name, s, mapName)
	switch {
	case st.Status == entryNeedsApproval && !approve:
		fmt.Fprintf(a.stdout, "mcpvisor holds %q until you approve it (the %s config is in the project directory, which is not trusted by itself): run 'mcpvisor trust %s', or add it with --approve.\n",
			name, s.scope, name)
	case st.Status == entryNeedsApproval:
		if !bytes.Equal(st.Pending.Entry, mine) {
			return failed(fmt.Errorf("--approve: the entry of %q in %s is no longer the one added: nothing was approved; see 'mcpvisor trust %s'", name, s.path, name))
		}
		store := a.state.trustStore()
		if store == nil {
			return failed(errors.New("--approve: no state directory to keep approvals in: set --state-dir or $" + envStateDir))
		}
		approval, err := cfg.Approval(name)
		if err != nil {
			return failed(fmt.Errorf("--approve: %w", err))
		}
		if err := store.Approve(ctx, approval); err != nil {
			return failed(fmt.Errorf("--approve: recording the approval: %w", err))
		}
		fmt.Fprintf(a.stdout, "Approved %q for %s. A running 'mcpvisor supervise' applies approvals on SIGHUP, or by itself with --watch.\n",
			name, st.Pending.Project)
	case st.Status == entryEnabled && approve && s.trusted():
		fmt.Fprintf(a.stdout, "Nothing to approve: the %s config is trusted.\n", s.scope)
	case st.Status == entryEnabled && approve:
		fmt.Fprintf(a.stdout, "Nothing to approve: this entry was approved before.\n")
	case st.Status == entryEnabled || st.Status == entryDisabled:
	default:
		fmt.Fprintf(a.stdout, "Note: %s: %s.\n", st.Status, st.Reason)
		if approve {
			return failed(fmt.Errorf("--approve: the entry is %s, not waiting for approval: nothing was approved", st.Status))
		}
	}
	return nil
}

// newEntry builds the entry from the flags and the arguments after NAME.
func newEntry(fl addFlags, target string, args []string) (addedEntry, error) {
	transport := fl.transport
	if transport == "" {
		transport = string(transports.TypeStdio)
	}
	e := addedEntry{Type: transport}
	k, ok := addableKind(transport)
	switch {
	case ok && k.Command:
		if len(fl.headers) > 0 {
			return e, usageError("-H sets a header of a remote server; a stdio server takes -e")
		}
		if target == "" {
			return e, usageError("the command must not be empty")
		}
		e.Command, e.Args = target, args
		env, err := keyValues(fl.env, "=", "-e", "KEY=VALUE", false)
		if err != nil {
			return e, err
		}
		e.Env = env
	case ok && k.Remote:
		if len(args) > 0 {
			return e, usageError("--transport %s takes a URL and no arguments, got %q", transport, args)
		}
		if len(fl.env) > 0 {
			return e, usageError("-e sets the environment of a stdio server; --transport %s takes -H", transport)
		}
		if err := checkURL(k, target); err != nil {
			return e, err
		}
		e.URL = target
		headers, err := keyValues(fl.headers, ":", "-H", `"Name: value"`, true)
		if err != nil {
			return e, err
		}
		e.Headers = headers
	default:
		return e, usageError("--transport %q: want %s", fl.transport, transports.KindList(addableKinds(false)))
	}
	return e, nil
}

// remoteKindAlternatives is the remote kinds as a usage line writes
// them: "http|sse|ws".
func remoteKindAlternatives() string {
	var names []string
	for _, k := range addableKinds(true) {
		names = append(names, string(k.Type))
	}
	return strings.Join(names, "|")
}

// addableKind returns the registered kind named exactly t that add can
// write: one started from a command or reached by URL.
func addableKind(t string) (transports.Kind, bool) {
	k, ok := transports.Lookup(transports.Type(t))
	return k, ok && string(k.Type) == t && (k.Command || k.Remote)
}

// addableKinds returns the kinds add can write (remote ones only, if
// remote), in transports.Kinds order.
func addableKinds(remote bool) []transports.Kind {
	var out []transports.Kind
	for _, k := range transports.Kinds() {
		if k.Remote || k.Command && !remote {
			out = append(out, k)
		}
	}
	return out
}

// keyValues splits each item at the first sep into a key and a value.
// Header names are trimmed and case-insensitive (a name given twice is an
// error either way); header values are trimmed.
func keyValues(items []string, sep, flag, form string, header bool) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	seen := map[string]bool{}
	for _, item := range items {
		k, v, ok := strings.Cut(item, sep)
		if header {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		}
		switch {
		case !ok || k == "":
			return nil, usageError("%s %q: want %s", flag, item, form)
		case header && !httpToken(k):
			return nil, usageError("%s %q: %q is not a header name", flag, item, k)
		case !header && strings.ContainsRune(k, 0):
			return nil, usageError("%s %q: the name holds a NUL", flag, item)
		}
		key := k
		if header {
			key = strings.ToLower(k)
		}
		if seen[key] {
			return nil, usageError("%s %s given twice", flag, k)
		}
		seen[key] = true
		out[k] = v
	}
	return out, nil
}

// checkURL checks a remote server's URL: absolute, with a scheme its
// transport speaks. A URL with ${VAR} references is checked when the
// config is loaded.
func checkURL(k transports.Kind, raw string) error {
	if raw == "" {
		return usageError("the URL must not be empty")
	}
	if strings.Contains(raw, "${") {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !slices.Contains(k.Schemes, u.Scheme) {
		return usageError("%q is not a %s URL: want an absolute %s URL", raw, k.Type, strings.Join(k.Schemes, ", "))
	}
	return nil
}

// looksLikeURL reports whether a command looks like a URL: one of a
// scheme some remote kind accepts.
func looksLikeURL(s string) bool {
	for _, k := range addableKinds(true) {
		for _, scheme := range k.Schemes {
			if strings.HasPrefix(strings.ToLower(s), scheme+"://") {
				return true
			}
		}
	}
	return false
}

// plainName reports whether a server name is made of letters, digits, '-'
// and '_' only, as claude requires of the names it adds.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// httpToken reports whether s is an HTTP field name (RFC 9110 token).
func httpToken(s string) bool {
	for _, c := range s {
		if !(c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c))) {
			return false
		}
	}
	return s != ""
}

// transportLabel is kind t's name for people ("WebSocket").
func transportLabel(t string) string {
	if k, ok := transports.Lookup(transports.Type(t)); ok {
		return k.Name()
	}
	return t
}

// scopeFlag is the flag that names s on a command line: " --scope S", or
// "" for a --config file (the command line already names it).
func scopeFlag(s scopeFile) string {
	if s.scope == scopeConfig {
		return ""
	}
	return " --scope " + s.scope
}
