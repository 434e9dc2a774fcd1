// Package access decides what each caller of the gateway may use: access
// rules that map identities (subject, client id, groups, roles, scopes;
// path.Match globs) to the servers and tools they may see and call, with
// allow and deny globs, an admin flag, and rate limits (Limiter).
//
// A Policy is pure: Compile checks a Config once, Policy.For evaluates
// it for one caller and returns a Grant, whose Server and Tool answer
// for the names the gateway lists or calls. Deny wins: a name any of the
// caller's matching rules denies is refused, whatever another allows.
// A caller no rule matches gets the Default (deny when rules are
// configured, unless Default says "allow").
//
// Concurrency: a Policy and its Grants are immutable and safe for
// concurrent use; a Limiter guards its state with its own lock.
package access

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
)

// ErrInvalidRules is wrapped by the error of Parse and Compile for rules
// they cannot honour (a bad glob, an unknown default, a negative limit,
// malformed JSON).
var ErrInvalidRules = errors.New("access: invalid access rules")

// Identity is the caller a Policy judges: the claims of its access
// token. The zero value is the anonymous caller.
type Identity struct {
	Subject, ClientID     string
	Groups, Roles, Scopes []string
}

// Key is the caller's rate-limit key: its subject, else its client id,
// else "anonymous".
func (id Identity) Key() string {
	switch {
	case id.Subject != "":
		return "sub:" + id.Subject
	case id.ClientID != "":
		return "client:" + id.ClientID
	}
	return "anonymous"
}

// Match selects the callers a rule applies to: every glob given must
// match (a list claim matches when any of its values does); an empty
// field matches every caller, so an empty Match matches everyone,
// the anonymous caller too.
type Match struct {
	Subject  string `json:"subject,omitempty"`
	ClientID string `json:"clientId,omitempty"`
	Groups   string `json:"groups,omitempty"`
	Roles    string `json:"roles,omitempty"`
	Scopes   string `json:"scopes,omitempty"`
}

// Filter is a pair of glob lists: a name passes when it matches an
// Allow glob (or Allow is empty) and no Deny glob.
type Filter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Limit is a rate limit: PerSecond calls a second on average with
// bursts of Burst (a token bucket; Burst 0 means PerSecond rounded up,
// at least 1), and at most Concurrent calls at once. A zero field is no
// limit of that kind.
type Limit struct {
	PerSecond  float64 `json:"perSecond,omitempty"`
	Burst      int     `json:"burst,omitempty"`
	Concurrent int     `json:"concurrent,omitempty"`
}

// IsZero reports whether l limits nothing.
func (l Limit) IsZero() bool { return l.PerSecond == 0 && l.Concurrent == 0 }

// Rule is one access rule. Servers globs match server names; Tools globs
// match qualified tool names (mcp__<server>__<tool>, as Options.Allow of
// the gateway) and the host's own tool names. The host's own tools,
// prompts and resources belong to the server "" (which "*" matches).
// Prompts and resources are judged by Servers alone. A rule with only
// deny globs grants nothing (it only takes away); a rule with an allow
// glob, or no glob at all, grants what its allow lists (an empty Allow
// list standing for everything).
type Rule struct {
	Match   Match  `json:"match"`
	Servers Filter `json:"servers"`
	Tools   Filter `json:"tools"`
	// Admin marks the callers it matches as those who may use the admin
	// actions (the management tools): once a rule sets it, a caller no
	// such rule matches is no admin, whatever its scopes (the gateway
	// also requires the admin scope of its resource server, if any).
	Admin bool `json:"admin,omitempty"`
	// RateLimit, when set, is the limit of the callers it matches
	// (the first matching rule with one wins), instead of the
	// Config's.
	RateLimit *Limit `json:"rateLimit,omitempty"`
}

// Default actions when no rule matches a caller.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Config is the access configuration: the "access" member of the
// supervise config, or the file of --access-rules.
type Config struct {
	Rules []Rule `json:"rules"`
	// Default is what a caller no rule matches gets: "allow" or "deny";
	// empty is deny when there are rules, allow when there are none.
	Default string `json:"default,omitempty"`
	// RateLimit is every caller's limit but where a matching rule has
	// its own.
	RateLimit *Limit `json:"rateLimit,omitempty"`
}

// Parse reads an access configuration: either a JSON array of rules or
// an object {rules, default, rateLimit}. Unknown members are refused.
func Parse(data []byte) (Config, error) {
	var c Config
	data = bytes.TrimSpace(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var err error
	if len(data) > 0 && data[0] == '[' {
		err = dec.Decode(&c.Rules)
	} else {
		err = dec.Decode(&c)
	}
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidRules, err)
	}
	return c, nil
}

// Policy is a compiled Config. A nil *Policy allows everything and
// limits nothing.
type Policy struct {
	rules        []Rule
	defaultAllow bool
	limit        Limit
}

// Compile checks c and returns its Policy. The error wraps
// ErrInvalidRules and names the rule at fault.
func Compile(c Config) (*Policy, error) {
	p := &Policy{rules: slices.Clone(c.Rules)}
	switch c.Default {
	case "":
		p.defaultAllow = len(c.Rules) == 0
	case Allow:
		p.defaultAllow = true
	case Deny:
	default:
		return nil, fmt.Errorf("%w: default %q: want %q or %q", ErrInvalidRules, c.Default, Allow, Deny)
	}
	if c.RateLimit != nil {
		if err := checkLimit(*c.RateLimit); err != nil {
			return nil, fmt.Errorf("%w: rateLimit: %v", ErrInvalidRules, err)
		}
		p.limit = *c.RateLimit
	}
	for i, r := range c.Rules {
		globs := []string{r.Match.Subject, r.Match.ClientID, r.Match.Groups, r.Match.Roles, r.Match.Scopes}
		globs = append(globs, r.Servers.Allow...)
		globs = append(globs, r.Servers.Deny...)
		globs = append(globs, r.Tools.Allow...)
		globs = append(globs, r.Tools.Deny...)
		for _, g := range globs {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("%w: rule %d: bad glob %q", ErrInvalidRules, i, g)
			}
		}
		if r.RateLimit != nil {
			if err := checkLimit(*r.RateLimit); err != nil {
				return nil, fmt.Errorf("%w: rule %d: rateLimit: %v", ErrInvalidRules, i, err)
			}
		}
	}
	return p, nil
}

func checkLimit(l Limit) error {
	if l.PerSecond < 0 || l.Burst < 0 || l.Concurrent < 0 {
		return errors.New("negative limit")
	}
	if l.Burst > 0 && l.PerSecond == 0 {
		return errors.New("burst without perSecond")
	}
	return nil
}

// For evaluates p for the caller id.
func (p *Policy) For(id Identity) Grant {
	if p == nil {
		return Grant{all: true}
	}
	g := Grant{p: p, limit: p.limit}
	limited := false
	for i := range p.rules {
		r := &p.rules[i]
		if !r.Match.matches(id) {
			continue
		}
		g.matched = append(g.matched, r)
		g.admin = g.admin || r.Admin
		if !limited && r.RateLimit != nil {
			g.limit, limited = *r.RateLimit, true
		}
	}
	return g
}

// AdminRules reports whether a rule of p sets Admin: then only the
// callers such a rule matches may use the admin actions.
func (p *Policy) AdminRules() bool {
	if p == nil {
		return false
	}
	for i := range p.rules {
		if p.rules[i].Admin {
			return true
		}
	}
	return false
}

// Rules returns the number of p's rules (a nil Policy has none).
func (p *Policy) Rules() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}

// Grant is what one caller may use under a Policy.
type Grant struct {
	p       *Policy
	all     bool // no policy: everything
	matched []*Rule
	admin   bool
	limit   Limit
}

// Matched reports how many rules matched the caller.
func (g Grant) Matched() int { return len(g.matched) }

// Admin reports whether a matching rule grants the admin actions.
func (g Grant) Admin() bool { return g.admin }

// Limit is the caller's rate limit (zero: none).
func (g Grant) Limit() Limit { return g.limit }

// Server reports whether the caller may use server (its prompts and
// resources; "" is the host's own): no matching rule's Servers denies
// it and one's Servers allows it, or no rule matched and the default
// allows.
func (g Grant) Server(server string) bool {
	if g.all {
		return true
	}
	if len(g.matched) == 0 {
		return g.p.defaultAllow
	}
	allowed := false
	for _, r := range g.matched {
		if anyMatch(r.Servers.Deny, server) {
			return false
		}
		if !allowed && grants(r) && (len(r.Servers.Allow) == 0 || anyMatch(r.Servers.Allow, server)) {
			allowed = true
		}
	}
	return allowed
}

// Tool reports whether the caller may see and call the tool named
// qualified of server ("" for the host's own): no matching rule's
// Servers or Tools denies it, and one rule's Servers and Tools both
// allow it; or no rule matched and the default allows.
func (g Grant) Tool(server, qualified string) bool {
	if g.all {
		return true
	}
	if len(g.matched) == 0 {
		return g.p.defaultAllow
	}
	allowed := false
	for _, r := range g.matched {
		if anyMatch(r.Servers.Deny, server) || anyMatch(r.Tools.Deny, qualified) {
			return false
		}
		if !allowed && grants(r) && (len(r.Servers.Allow) == 0 || anyMatch(r.Servers.Allow, server)) &&
			(len(r.Tools.Allow) == 0 || anyMatch(r.Tools.Allow, qualified)) {
			allowed = true
		}
	}
	return allowed
}

// grants reports whether r grants anything: it has an allow glob, or no
// glob at all (a deny-only rule only takes away).
func grants(r *Rule) bool {
	return len(r.Servers.Allow)+len(r.Tools.Allow) > 0 || len(r.Servers.Deny)+len(r.Tools.Deny) == 0
}

func (m *Match) matches(id Identity) bool {
	return globOK(m.Subject, id.Subject) && globOK(m.ClientID, id.ClientID) &&
		listOK(m.Groups, id.Groups) && listOK(m.Roles, id.Roles) && listOK(m.Scopes, id.Scopes)
}

// globOK: an empty glob matches anything.
func globOK(glob, s string) bool {
	if glob == "" {
		return true
	}
	ok, _ := path.Match(glob, s)
	return ok
}

func listOK(glob string, values []string) bool {
	if glob == "" {
		return true
	}
	for _, v := range values {
		if ok, _ := path.Match(glob, v); ok {
			return true
		}
	}
	return false
}

func anyMatch(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
