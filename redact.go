package mcpvisor

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Redacted replaces a secret in a StatusConfig.
const Redacted = "[redacted]"

// StatusConfig is a server's config entry as a status shows it: what
// reaches the server, with every value that may be a secret replaced by
// Redacted. Env and header names stay, their values never do; so do the
// user info of a URL (name and password) and its query values, and the value of an argument
// whose flag names a secret (--token=…, --api-key …; see
// transports.SecretName).
// OAuth settings are not shown.
type StatusConfig struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Defer is the entry's "defer": its tools are found by search only.
	Defer bool `json:"defer,omitempty"`
}

// redact renders a config entry for a status.
func redact(sc ServerConfig) StatusConfig {
	out := StatusConfig{Type: string(sc.Kind()), Command: sc.Command, Cwd: sc.Cwd,
		Env: redactValues(sc.Env), Headers: redactValues(sc.Headers), URL: redactURL(sc.URL), Defer: sc.Defer}
	if sc.Args != nil {
		out.Args = make([]string, len(sc.Args))
		secretNext := false
		for i, a := range sc.Args {
			switch {
			case secretNext:
				out.Args[i], secretNext = Redacted, false
			case strings.HasPrefix(a, "-") && strings.Contains(a, "="):
				flag, _, _ := strings.Cut(a, "=")
				out.Args[i] = a
				if transports.SecretName(flag) {
					out.Args[i] = flag + "=" + Redacted
				}
			default:
				out.Args[i] = a
				secretNext = strings.HasPrefix(a, "-") && transports.SecretName(a)
			}
		}
	}
	return out
}

func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = Redacted
	}
	return out
}

// redactURL hides a URL's user info (name and password) and query
// values. A URL that does not parse is hidden whole.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return Redacted
	}
	var user string
	if u.User != nil {
		// A user name is often a token (https://ghp_…@host), so neither
		// part of the user info is shown.
		user = Redacted + "@"
		u.User = nil
	}
	keys := slices.Sorted(maps.Keys(u.Query()))
	frag := u.EscapedFragment()
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	s := u.String()
	if user != "" {
		s = strings.Replace(s, "://", "://"+user, 1)
	}
	for i, k := range keys {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		s += sep + url.QueryEscape(k) + "=" + Redacted
	}
	if frag != "" {
		s += "#" + frag
	}
	return s
}
