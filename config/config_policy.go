package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// PolicyOptionSource is the Source Load gives Options.Policy
// when the caller left it empty: it names that policy in exclusion
// reasons and is the File of the *Error for a problem in it.
const PolicyOptionSource = "config.Options.Policy"

// Policy is an administrator's rule on which servers may run, as
// the "allowedMcpServers" and "deniedMcpServers" members of the managed
// file (the JSON form of this type) or Options.Policy.
//
// A server that matches an entry of Denied never runs, whatever Allowed
// says. With Allowed nil every other server runs; otherwise a server must
// match an entry of *Allowed, and an empty list lets no server run. Which
// Allowed entries count depends on the server, because its name is a
// label that whoever writes the config chooses, while its command and URL
// are what actually runs: a stdio server must match a serverCommand entry
// when *Allowed has any, a remote (http, sse, ws) server a serverUrl entry
// when *Allowed has any; otherwise (and for in-process servers, always) a
// serverName entry. Denied entries all count: a name, a command or a URL
// match denies.
//
// Policy entries are matched against the server entry after ${VAR}
// expansion; they are never expanded themselves.
type Policy struct {
	// Allowed, when not nil, lists the servers allowed to run. Nil (the
	// JSON member absent or null) allows every server that Denied does not
	// deny; a pointer to an empty list (JSON []) allows none. A pointer,
	// rather than a nil-or-empty slice, so that an allow list built empty
	// by a program still allows nothing, and so that the JSON form
	// round-trips.
	Allowed *[]PolicyEntry `json:"allowedMcpServers,omitempty"`

	// Denied lists the servers that never run.
	Denied []PolicyEntry `json:"deniedMcpServers,omitempty"`

	// ProjectServers says what becomes of the servers of untrusted layers
	// (a project's .mcp.json and .mcp.local.json, and host layers not
	// marked trusted): ProjectServersApprove (or empty, the default) lets
	// them run once the user approved their entry; ProjectServersDeny
	// excludes them all, approved or not.
	ProjectServers string `json:"projectServers,omitempty"`

	// RequireSandbox says which stdio servers must run confined (see
	// docs/sandbox.md): RequireSandboxProject the servers of untrusted
	// layers, RequireSandboxAll every stdio server; empty (the default)
	// none. Load gives such a server without a "sandbox" the
	// default sandbox ("sandbox": true) and excludes one whose entry (or
	// file) sets "sandbox": false, so that it never runs unconfined; a
	// sandbox that cannot be had then fails the server as any other.
	// Remote and in-process servers run nothing here and are not
	// affected.
	RequireSandbox string `json:"requireSandbox,omitempty"`

	// Source names the policy in the reasons Check gives and is the File
	// of the errors Validate returns: Load sets it to the managed
	// file's path, or PolicyOptionSource. Empty names nothing.
	Source string `json:"-"`
}

// The values of Policy.ProjectServers.
const (
	ProjectServersApprove = "approve"
	ProjectServersDeny    = "deny"
)

// The values of Policy.RequireSandbox.
const (
	RequireSandboxProject = "project"
	RequireSandboxAll     = "all"
)

// MarshalJSON writes the policy as the managed file holds it. A non-nil
// Allowed is written as an array even when it points to a nil slice, so
// that "allows nothing" survives the round trip.
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain Policy // without this method
	q := plain(p)
	if q.Allowed != nil && *q.Allowed == nil {
		q.Allowed = &[]PolicyEntry{}
	}
	return json.Marshal(q)
}

// PolicyEntry is one entry of a Policy list. Exactly one of its
// members is set.
type PolicyEntry struct {
	// ServerName matches the server's name (its key in the server map) as
	// a path.Match pattern: '*' matches any run of characters but '/', '?'
	// one character, [a-z] a class, '\' escapes.
	ServerName string `json:"serverName,omitempty"`

	// ServerCommand matches a stdio server's command line; see
	// CommandPattern.
	ServerCommand CommandPattern `json:"serverCommand,omitzero"`

	// ServerURL matches a remote server's URL. It is scheme://host[:port]
	// followed by an optional path and query, where '*' matches any run of
	// characters (possibly none) within the part it is in: scheme, host,
	// port, or path and query together; every other character stands for
	// itself. Scheme and host compare case-insensitively, and a trailing
	// '.' of the server's host is ignored. No port means the scheme's
	// default port (80 for http and ws, 443 for https and wss); :* means
	// any port. No path means "/". The server's path is compared decoded
	// (%2F is "/"), with "." and ".." segments resolved; its query is
	// compared as written, and its fragment and user information are
	// ignored. So "https://*.example.com/*" matches
	// https://a.b.example.com/mcp but neither https://example.com/ (the
	// dot is literal), https://a.example.com:8443/ (another port),
	// https://evil.com/.example.com/ nor https://a.example.com@evil.com/
	// (whose host is evil.com).
	ServerURL string `json:"serverUrl,omitempty"`
}

// CommandPattern is the serverCommand of a PolicyEntry. In JSON it is an
// array of strings, which sets Exact, or a string, which sets Glob. The
// zero value is absent.
type CommandPattern struct {
	// Exact, when not nil, is a command followed by its arguments. It
	// matches a stdio server whose command and args are these strings, in
	// this order, and no others. Commands compare as written, not resolved
	// against PATH or cwd.
	Exact []string

	// Glob, when Exact is nil, is matched against the server's command
	// line: its command and arguments joined by single spaces. '*' matches
	// any run of characters, spaces and '/' included, so it crosses
	// argument boundaries ("npx -y @corp/*" matches npx with -y and any
	// arguments after "@corp/"); every other character stands for itself.
	// Use Exact to pin the arguments.
	Glob string
}

// IsZero reports whether the pattern is absent.
func (c CommandPattern) IsZero() bool { return c.Exact == nil && c.Glob == "" }

// MarshalJSON writes Exact as an array, or else Glob as a string.
func (c CommandPattern) MarshalJSON() ([]byte, error) {
	if c.Exact != nil {
		return json.Marshal(c.Exact)
	}
	return json.Marshal(c.Glob)
}

// UnmarshalJSON reads an array of strings into Exact or a string into
// Glob; null leaves the pattern absent.
func (c *CommandPattern) UnmarshalJSON(data []byte) error {
	var p CommandPattern
	switch k := jsonKind(data); k {
	case "null":
	case "string":
		if err := json.Unmarshal(data, &p.Glob); err != nil {
			return err
		}
	case "array":
		if err := json.Unmarshal(data, &p.Exact); err != nil {
			return err
		}
	default:
		return fmt.Errorf("serverCommand: want array or string, got %s", k)
	}
	*c = p
	return nil
}

// String writes the pattern as it is written in JSON.
func (c CommandPattern) String() string {
	b, _ := c.MarshalJSON() // strings always marshal
	return string(b)
}

// String describes the entry as it is written in JSON, without the
// braces: serverUrl "https://*.example.com/*".
func (e PolicyEntry) String() string {
	var parts []string
	if e.ServerName != "" {
		parts = append(parts, "serverName "+strconv.Quote(e.ServerName))
	}
	if !e.ServerCommand.IsZero() {
		parts = append(parts, "serverCommand "+e.ServerCommand.String())
	}
	if e.ServerURL != "" {
		parts = append(parts, "serverUrl "+strconv.Quote(e.ServerURL))
	}
	if len(parts) == 0 {
		return "empty entry"
	}
	return strings.Join(parts, ", ")
}

// Validate reports every malformed entry: one without exactly one member,
// or whose pattern is malformed. Each problem is a *Error with File
// p.Source and Path locating the entry (allowedMcpServers[2]) or its
// member (deniedMcpServers[0].serverUrl); several are joined with
// errors.Join. A nil policy is valid.
func (p *Policy) Validate() error {
	errs := p.validate()
	if len(errs) == 0 {
		return nil
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

func (p *Policy) validate() []*Error {
	if p == nil {
		return nil
	}
	var errs []*Error
	list := func(name string, entries []PolicyEntry) {
		for i, e := range entries {
			path := pathIndex(name, i)
			if e := e.validate(path); e != nil {
				e.File = p.Source
				errs = append(errs, e)
			}
		}
	}
	if p.Allowed != nil {
		list("allowedMcpServers", *p.Allowed)
	}
	list("deniedMcpServers", p.Denied)
	if e := validProjectServers(p.ProjectServers); e != nil {
		e.File = p.Source
		errs = append(errs, e)
	}
	if e := validRequireSandbox(p.RequireSandbox); e != nil {
		e.File = p.Source
		errs = append(errs, e)
	}
	return errs
}

// validProjectServers checks a projectServers value.
func validProjectServers(v string) *Error {
	switch v {
	case "", ProjectServersApprove, ProjectServersDeny:
		return nil
	}
	return &Error{Path: "projectServers", Err: fmt.Errorf("%q: want %q or %q", v, ProjectServersApprove, ProjectServersDeny)}
}

// validate checks an entry found at the Error path at.
func (e PolicyEntry) validate(at string) *Error {
	var set []string
	if e.ServerName != "" {
		set = append(set, `"serverName"`)
	}
	if !e.ServerCommand.IsZero() {
		set = append(set, `"serverCommand"`)
	}
	if e.ServerURL != "" {
		set = append(set, `"serverUrl"`)
	}
	switch {
	case len(set) == 0:
		return &Error{Path: at, Err: errEntryNeedsOne}
	case len(set) > 1:
		return &Error{Path: at, Err: fmt.Errorf("entry has %s; an entry has exactly one", strings.Join(set, " and "))}
	}
	switch c := e.ServerCommand; {
	case e.ServerName != "":
		if _, err := path.Match(e.ServerName, ""); err != nil {
			return &Error{Path: pathKey(at, "serverName"), Err: fmt.Errorf("malformed pattern %q: %w", e.ServerName, err)}
		}
	case c.Exact != nil && c.Glob != "":
		return &Error{Path: pathKey(at, "serverCommand"), Err: errors.New("both Exact and Glob are set; set one")}
	case c.Exact != nil:
		if len(c.Exact) == 0 || c.Exact[0] == "" {
			return &Error{Path: pathKey(at, "serverCommand"), Err: errors.New("command must not be empty")}
		}
	case e.ServerURL != "":
		if _, err := parseURLPattern(e.ServerURL); err != nil {
			return &Error{Path: pathKey(at, "serverUrl"), Err: err}
		}
	}
	return nil
}

var errEntryNeedsOne = errors.New(`entry needs one of "serverName", "serverCommand" or "serverUrl"`)

// Check reports whether the server named name, configured as sc, may run
// under the policy (see Policy for the rules). A nil policy allows
// every server. When ok is false, reason names the rule, prefixed by
// Source and ": " when Source is set: the denying entry, as in
// `deniedMcpServers[1] (serverUrl "https://*.evil.com/*")`, or why no
// allowed entry admits the server. A malformed policy (see Validate)
// allows nothing. Reasons never quote the server's command line or URL,
// which may hold secrets after expansion; they are empty when ok is true.
//
// Under requireSandbox "all" a stdio server without an enabled Sandbox
// fails (Load gives the servers it loads the default sandbox
// first); "project" concerns layers, which Check does not see.
//
// Check pins what starts or where it connects, not how: a command match
// says nothing of the server's env or cwd, a URL match nothing of its
// headers.
func (p *Policy) Check(name string, sc mcpvisor.ServerConfig) (ok bool, reason string) {
	if p == nil {
		return true, ""
	}
	if errs := p.validate(); len(errs) > 0 {
		e := *errs[0]
		e.File = ""
		return false, p.reason("malformed policy: " + e.Error())
	}
	return p.check(name, sc)
}

// check is Check on a policy already validated.
func (p *Policy) check(name string, sc mcpvisor.ServerConfig) (ok bool, reason string) {
	if p.RequireSandbox == RequireSandboxAll && p.requiresSandbox(false, sc) && (sc.Sandbox == nil || !sc.Sandbox.Enabled) {
		return false, p.reason(`requireSandbox is "all": a stdio server must have an enabled "sandbox"`)
	}
	id := identify(name, sc)
	for i, e := range p.Denied {
		if e.matches(id) {
			return false, p.reason(fmt.Sprintf("deniedMcpServers[%d] (%s)", i, e))
		}
	}
	if p.Allowed == nil {
		return true, ""
	}
	allowed := *p.Allowed
	if len(allowed) == 0 {
		return false, p.reason("allowedMcpServers is empty: no server may run")
	}
	// The member that identifies this server in the allow list.
	var key string
	switch {
	case id.command != nil && slices.ContainsFunc(allowed, func(e PolicyEntry) bool { return !e.ServerCommand.IsZero() }):
		key = "serverCommand"
	case id.remote && slices.ContainsFunc(allowed, func(e PolicyEntry) bool { return e.ServerURL != "" }):
		key = "serverUrl"
	default:
		key = "serverName"
	}
	for _, e := range allowed {
		if e.key() == key && e.matches(id) {
			return true, ""
		}
	}
	switch key {
	case "serverCommand":
		return false, p.reason("no allowedMcpServers serverCommand entry matches its command line (a stdio server must match one when the list has any)")
	case "serverUrl":
		return false, p.reason("no allowedMcpServers serverUrl entry matches its url (a remote server must match one when the list has any)")
	}
	return false, p.reason("no allowedMcpServers serverName entry matches its name")
}

func (p *Policy) reason(r string) string {
	if p.Source == "" {
		return r
	}
	return p.Source + ": " + r
}

// key names the member an entry sets ("" for a malformed entry).
func (e PolicyEntry) key() string {
	switch {
	case e.ServerName != "":
		return "serverName"
	case !e.ServerCommand.IsZero():
		return "serverCommand"
	case e.ServerURL != "":
		return "serverUrl"
	}
	return ""
}

// serverIdentity is what policy entries match a server on.
type serverIdentity struct {
	name    string
	command []string // a command kind's (stdio's) command and args; nil otherwise
	remote  bool     // a server of a remote kind (http, sse, ws)
	url     *url.URL // a remote server's parsed URL; nil if it does not parse
}

func identify(name string, sc mcpvisor.ServerConfig) serverIdentity {
	id := serverIdentity{name: name}
	k, _ := transports.Lookup(sc.Kind())
	switch {
	case k.Command:
		id.command = append([]string{sc.Command}, sc.Args...)
	case k.Remote:
		id.remote = true
		if u, err := url.Parse(sc.URL); err == nil && u.Scheme != "" && u.Host != "" {
			id.url = u
		}
	}
	return id
}

// matches reports whether a valid entry matches the server. A serverUrl
// entry matches no remote server whose URL does not parse, and a
// serverCommand or serverUrl entry nothing of the other kind or
// in-process.
func (e PolicyEntry) matches(id serverIdentity) bool {
	switch e.key() {
	case "serverName":
		ok, _ := path.Match(e.ServerName, id.name)
		return ok
	case "serverCommand":
		switch {
		case id.command == nil:
			return false
		case e.ServerCommand.Exact != nil:
			return slices.Equal(e.ServerCommand.Exact, id.command)
		}
		return wildcardMatch(e.ServerCommand.Glob, strings.Join(id.command, " "))
	case "serverUrl":
		if id.url == nil {
			return false
		}
		pat, err := parseURLPattern(e.ServerURL)
		return err == nil && pat.matches(id.url)
	}
	return false
}

// urlPattern is a parsed serverUrl entry.
type urlPattern struct {
	scheme, host string // lower case; host without IPv6 brackets
	port         string // "" means the scheme's default port
	rest         string // path and query
}

func parseURLPattern(s string) (urlPattern, error) {
	const example = ` (want scheme://host[:port][/path], e.g. "https://*.example.com/*")`
	scheme, after, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: no scheme%s", s, example)
	}
	for _, c := range []byte(scheme) {
		if !(c == '*' || c == '+' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return urlPattern{}, fmt.Errorf("malformed URL pattern %q: bad scheme%s", s, example)
		}
	}
	if strings.Contains(after, "#") {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: a fragment is never sent, so it cannot be matched", s)
	}
	authority, rest := after, ""
	if i := strings.IndexAny(after, "/?"); i >= 0 {
		authority, rest = after[:i], after[i:]
	}
	if strings.Contains(authority, "@") {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: user information is not matched; leave it out", s)
	}
	host, port := authority, ""
	hasPort := false
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return urlPattern{}, fmt.Errorf("malformed URL pattern %q: unclosed '[' in the host", s)
		}
		host, port = authority[1:end], authority[end+1:]
		if port != "" {
			if port[0] != ':' {
				return urlPattern{}, fmt.Errorf("malformed URL pattern %q: bad port%s", s, example)
			}
			port, hasPort = port[1:], true
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host, port, hasPort = authority[:i], authority[i+1:], true
	}
	if host == "" {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: no host%s", s, example)
	}
	if hasPort && (port == "" || strings.Trim(port, "0123456789*") != "") {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: a port is digits or '*'", s)
	}
	switch {
	case rest == "":
		rest = "/"
	case rest[0] == '?':
		rest = "/" + rest
	}
	return urlPattern{scheme: strings.ToLower(scheme), host: strings.ToLower(host), port: port, rest: rest}, nil
}

// matches reports whether the pattern matches u, which has a scheme and a
// host.
func (p urlPattern) matches(u *url.URL) bool {
	scheme := strings.ToLower(u.Scheme)
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	def := transports.DefaultPort(scheme)
	port := u.Port()
	if port == "" {
		port = def
	}
	if p.port == "" {
		if port != def {
			return false
		}
	} else if !wildcardMatch(p.port, port) {
		return false
	}
	rest := u.Path
	if rest == "" {
		rest = "/"
	}
	clean := path.Clean(rest)
	if strings.HasSuffix(rest, "/") && clean != "/" {
		clean += "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		clean += "?" + u.RawQuery
	}
	return wildcardMatch(p.scheme, scheme) && wildcardMatch(p.host, host) && wildcardMatch(p.rest, clean)
}

// wildcardMatch reports whether s matches pattern, in which '*' matches
// any run of bytes (possibly none) and every other byte itself.
func wildcardMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0 // the last '*' seen, and where in s it started matching
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0: // let the last '*' take one more byte
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// parsePolicy decodes the policy members of a managed file's top-level
// object. has reports whether either list is present (not null). Errors
// lack File; there is at most one per entry.
func parsePolicy(top map[string]json.RawMessage) (policy Policy, has bool, errs []*Error) {
	list := func(name string) (entries []PolicyEntry, present bool) {
		raw, ok := top[name]
		if !ok || jsonKind(raw) == "null" {
			return nil, false
		}
		if k := jsonKind(raw); k != "array" {
			errs = append(errs, typeError(name, "array", k))
			return nil, true
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			errs = append(errs, &Error{Path: name, Err: err})
			return nil, true
		}
		entries = make([]PolicyEntry, 0, len(elems))
		for i, elem := range elems {
			path := pathIndex(name, i)
			e, ce := decodePolicyEntry(elem, path)
			if ce == nil {
				ce = e.validate(path)
			}
			if ce != nil {
				errs = append(errs, ce)
				continue
			}
			entries = append(entries, e)
		}
		return entries, true
	}
	allowed, hasAllowed := list("allowedMcpServers")
	denied, hasDenied := list("deniedMcpServers")
	if hasAllowed {
		policy.Allowed = &allowed
	}
	policy.Denied = denied
	word := func(name string, into *string, valid func(string) *Error) (present bool) {
		raw, ok := top[name]
		if !ok || jsonKind(raw) == "null" {
			return false
		}
		if k := jsonKind(raw); k != "string" {
			errs = append(errs, typeError(name, "string", k))
		} else if err := json.Unmarshal(raw, into); err != nil {
			errs = append(errs, &Error{Path: name, Err: err})
		} else if e := valid(*into); e != nil {
			errs = append(errs, e)
		}
		return true
	}
	hasProject := word("projectServers", &policy.ProjectServers, validProjectServers)
	hasSandbox := word("requireSandbox", &policy.RequireSandbox, validRequireSandbox)
	return policy, hasAllowed || hasDenied || hasProject || hasSandbox, errs
}

// decodePolicyEntry decodes one list element. Unlike a server entry, a
// policy entry may hold no unknown member: a misspelt key must not quietly
// widen what the entry allows or narrow what it denies.
func decodePolicyEntry(raw json.RawMessage, path string) (PolicyEntry, *Error) {
	var e PolicyEntry
	if k := jsonKind(raw); k != "object" {
		return e, typeError(path, "object", k)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return e, &Error{Path: path, Err: err}
	}
	present := 0
	var both []string
	for _, k := range slices.Sorted(maps.Keys(members)) {
		v := members[k]
		p := pathKey(path, k)
		kind := jsonKind(v)
		if kind == "null" {
			continue // absent
		}
		switch k {
		case "serverName", "serverUrl":
			if kind != "string" {
				return e, typeError(p, "string", kind)
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return e, &Error{Path: p, Err: err}
			}
			if s == "" {
				return e, &Error{Path: p, Err: errors.New("must not be empty")}
			}
			if k == "serverName" {
				e.ServerName = s
			} else {
				e.ServerURL = s
			}
		case "serverCommand":
			switch kind {
			case "string":
				if err := json.Unmarshal(v, &e.ServerCommand.Glob); err != nil {
					return e, &Error{Path: p, Err: err}
				}
				if e.ServerCommand.Glob == "" {
					return e, &Error{Path: p, Err: errors.New("must not be empty")}
				}
			case "array":
				if ce := decodeValue(reflect.ValueOf(&e.ServerCommand.Exact).Elem(), v, p); ce != nil {
					return e, ce
				}
			default:
				return e, typeError(p, "array or string", kind)
			}
		default:
			return e, &Error{Path: p, Err: fmt.Errorf(`unknown member %q: an entry has one of "serverName", "serverCommand" or "serverUrl"`, k)}
		}
		present++
		both = append(both, strconv.Quote(k))
	}
	if present > 1 {
		return e, &Error{Path: path, Err: fmt.Errorf("entry has %s; an entry has exactly one", strings.Join(both, " and "))}
	}
	return e, nil
}
