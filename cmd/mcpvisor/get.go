package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor/cmd/mcpvisor/internal/mcpfile"
)

// getCmd is `mcpvisor get`: it prints a server's entries and their
// status. It runs in cobra's goroutine.
type getCmd struct{ *app }

func (a getCmd) command() *cobra.Command {
	var asJSON, showSecrets bool
	cmd := &cobra.Command{
		Use:   "get [--json] [--show-secrets] NAME",
		Short: "Show a server's entry, its scope and file, and its status, as `claude mcp get` does",
		Long: `get shows the entry of a server as the config files hold it: the scope and the
file it comes from (the one the loader uses, when several define the name, and
the others it overrides), and its status as the configuration and the recorded
approvals decide it — nothing is started or contacted:

  enabled         loaded: a supervisor starts it (a lazy one on first use)
  disabled        loaded with "disabled": true
  needs-approval  a local or project entry not approved as written ('mcpvisor trust')
  excluded        a managed policy keeps it from running
  not-loaded      its file is not read (the managed file holds servers)
  invalid         the loader rejects the entry (the reason says why)
  config-error    the configuration does not load, for another reason

The values of env and headers, OAuth secrets and a URL's password are shown as
<redacted> (a value made only of ${VAR} references is shown: it names the
variable, not the secret); --show-secrets shows them as written.

--json prints one object:
  {"name","scope","file","status","reason","entry","overrides":[{"scope","file"}]}

Exit codes:
  0  shown
  1  no such server
  2  usage error`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.get(args[0], asJSON, showSecrets)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&showSecrets, "show-secrets", false, "show env and header values and OAuth secrets as written")
	return cmd
}

// getJSON is what get --json prints.
type getJSON struct {
	Name      string          `json:"name"`
	Scope     string          `json:"scope"`
	File      string          `json:"file"`
	Status    string          `json:"status"`
	Reason    string          `json:"reason"`
	Entry     json.RawMessage `json:"entry"`
	Overrides []scopeJSON     `json:"overrides"`
}

type scopeJSON struct {
	Scope string `json:"scope"`
	File  string `json:"file"`
}

func (a getCmd) get(name string, asJSON, showSecrets bool) error {
	scopes, err := a.configs.editableScopes()
	if err != nil {
		return failed(err)
	}
	if len(a.configs.files) == 0 {
		if m, ok := managedScope(); ok {
			scopes = append(scopes, m) // exclusive: whatever it holds is used
		}
	}
	defs, unreadable := a.configs.definitionsOf(name, scopes)
	if len(defs) == 0 {
		return failed(fmt.Errorf("no MCP server named %q in:%s%s", name, describeScopes(scopes), unreadableNote(unreadable)))
	}
	used := defs[len(defs)-1] // the highest precedence
	cfg, loadErr := a.configs.loadForState()
	st := stateOf(cfg, loadErr, name, used.scopeFile, used.file.MapName())

	entry := used.entry
	if !showSecrets {
		entry = redactEntry(entry)
	}
	out := getJSON{Name: name, Scope: used.scope, File: used.path, Status: st.Status, Reason: st.Reason,
		Entry: entry, Overrides: []scopeJSON{}}
	for _, d := range slices.Backward(defs[:len(defs)-1]) {
		out.Overrides = append(out.Overrides, scopeJSON{Scope: d.scope, File: d.path})
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return writeOrFail(enc.Encode(out))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", name)
	fmt.Fprintf(&b, "  Scope: %s\n", used.scope)
	fmt.Fprintf(&b, "  File: %s\n", used.path)
	status := st.Status
	if st.Reason != "" {
		status += ": " + st.Reason
	}
	if st.Status == entryNeedsApproval {
		status += " (run 'mcpvisor trust " + name + "')"
	}
	fmt.Fprintf(&b, "  Status: %s\n", status)
	var indented bytes.Buffer
	if json.Indent(&indented, entry, "    ", "  ") != nil {
		indented.Reset()
		indented.Write(entry)
	}
	fmt.Fprintf(&b, "  Entry:\n    %s\n", indented.String())
	for _, o := range out.Overrides {
		fmt.Fprintf(&b, "  Overrides: the entry of the %s config (%s)\n", o.Scope, o.File)
	}
	if used.scope != scopeManaged {
		fmt.Fprintf(&b, "\nTo remove this server, run: mcpvisor remove %s%s\n", name, scopeFlag(used.scopeFile))
	}
	_, err = fmt.Fprint(a.stdout, b.String())
	return writeOrFail(err)
}

// redacted replaces a secret that get does not show.
const redacted = "<redacted>"

// onlyReferences matches a value made only of ${VAR} references (no
// default, which could be a secret): it names variables, not secrets.
var onlyReferences = regexp.MustCompile(`^(\$\{[A-Za-z_][A-Za-z0-9_]*\})+$`)

// secretPaths are the entry members (below the entry) that hold secrets.
var secretPaths = []string{
	"oauth.clientSecret", "oauth.privateKey", "oauth.enterprise.idToken",
	"oauth.enterprise.idpClientSecret", "oauth.workload.token",
}

// redactEntry returns the entry as written with its secrets replaced:
// the values of env and headers, the OAuth secrets, and the password of
// a URL.
func redactEntry(raw []byte) []byte {
	return mcpfile.ReplaceStrings(raw, func(path []string, v string) (string, bool) {
		p := strings.Join(path, ".")
		switch {
		case onlyReferences.MatchString(v):
			return "", false
		case len(path) == 2 && (path[0] == "env" || path[0] == "headers"):
			return redacted, true
		case slices.Contains(secretPaths, p):
			return redacted, true
		case p == "url":
			if u, err := url.Parse(v); err == nil {
				if _, ok := u.User.Password(); ok {
					return u.Redacted(), true
				}
			}
		}
		return "", false
	})
}
