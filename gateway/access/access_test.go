package access_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/gateway/access"
)

var (
	alice = access.Identity{Subject: "alice", ClientID: "app", Groups: []string{"eng", "oncall"}, Roles: []string{"dev"}, Scopes: []string{"mcp:tools"}}
	bob   = access.Identity{Subject: "bob", ClientID: "app", Groups: []string{"sales"}, Scopes: []string{"mcp:tools"}}
	robot = access.Identity{ClientID: "ci-bot", Scopes: []string{"mcp:tools", "mcp:ci"}}
	anon  = access.Identity{}
)

func TestPolicyTable(t *testing.T) {
	rules := `{"rules": [
	  {"match": {"groups": "eng"}, "servers": {"allow": ["github", "db*"], "deny": ["db-prod"]}},
	  {"match": {"groups": "oncall"}, "tools": {"deny": ["mcp__github__delete_*"]}},
	  {"match": {"subject": "bob"}, "servers": {"allow": ["crm"]}, "tools": {"allow": ["mcp__crm__read_*"]}},
	  {"match": {"clientId": "ci-*", "scopes": "mcp:ci"}, "servers": {"allow": ["github"]}, "tools": {"allow": ["mcp__github__get_*"]}, "admin": true},
	  {"match": {"roles": "dev"}, "servers": {"allow": [""]}}
	]}`
	c, err := access.Parse([]byte(rules))
	require.NoError(t, err)
	p, err := access.Compile(c)
	require.NoError(t, err)

	type check struct {
		id            access.Identity
		server, tool  string
		toolOK, srvOK bool
		admin         bool
	}
	for i, tc := range []check{
		{alice, "github", "mcp__github__create_issue", true, true, false},
		{alice, "github", "mcp__github__delete_repo", false, true, false}, // deny of the oncall rule wins over eng's allow
		{alice, "db-test", "mcp__db-test__query", true, true, false},
		{alice, "db-prod", "mcp__db-prod__query", false, false, false}, // server deny
		{alice, "crm", "mcp__crm__read_lead", false, false, false},     // no rule of hers allows crm
		{alice, "", "host_tool", true, true, false},                    // the dev role's rule allows the host's own
		{bob, "crm", "mcp__crm__read_lead", true, true, false},
		{bob, "crm", "mcp__crm__write_lead", false, true, false}, // tools allow list
		{bob, "github", "mcp__github__create_issue", false, false, false},
		{bob, "", "host_tool", false, false, false},
		{robot, "github", "mcp__github__get_file", true, true, true},
		{robot, "github", "mcp__github__create_issue", false, true, true},
		{anon, "github", "mcp__github__get_file", false, false, false}, // no rule matches: default deny
	} {
		g := p.For(tc.id)
		assert.Equal(t, tc.toolOK, g.Tool(tc.server, tc.tool), "%d: tool %s of %s for %+v", i, tc.tool, tc.server, tc.id)
		assert.Equal(t, tc.srvOK, g.Server(tc.server), "%d: server %s for %+v", i, tc.server, tc.id)
		assert.Equal(t, tc.admin, g.Admin(), "%d: admin", i)
	}
}

func TestPolicyDefaults(t *testing.T) {
	// No policy, or no rules: everything.
	var none *access.Policy
	assert.True(t, none.For(anon).Tool("a", "mcp__a__x"))
	empty, err := access.Compile(access.Config{})
	require.NoError(t, err)
	assert.True(t, empty.For(anon).Tool("a", "mcp__a__x"))
	assert.True(t, empty.For(anon).Server("a"))

	one := []access.Rule{{Match: access.Match{Subject: "alice"}}}
	denied, err := access.Compile(access.Config{Rules: one})
	require.NoError(t, err)
	assert.False(t, denied.For(bob).Tool("a", "mcp__a__x"), "rules configured, none matches: deny")
	assert.True(t, denied.For(alice).Tool("a", "mcp__a__x"), "an empty filter allows all")

	allowed, err := access.Compile(access.Config{Rules: one, Default: access.Allow})
	require.NoError(t, err)
	assert.True(t, allowed.For(bob).Tool("a", "mcp__a__x"), "default allow")

	// An empty match matches the anonymous caller too.
	everyone, err := access.Compile(access.Config{Rules: []access.Rule{{Servers: access.Filter{Allow: []string{"pub"}}}}})
	require.NoError(t, err)
	assert.True(t, everyone.For(anon).Server("pub"))
	assert.False(t, everyone.For(anon).Server("priv"))
}

func TestPolicyLimits(t *testing.T) {
	p, err := access.Compile(access.Config{
		RateLimit: &access.Limit{PerSecond: 10},
		Rules: []access.Rule{
			{Match: access.Match{Subject: "alice"}, RateLimit: &access.Limit{PerSecond: 1, Concurrent: 2}},
			{Match: access.Match{Groups: "eng"}, RateLimit: &access.Limit{PerSecond: 5}},
			{Match: access.Match{}},
		}})
	require.NoError(t, err)
	assert.Equal(t, access.Limit{PerSecond: 1, Concurrent: 2}, p.For(alice).Limit(), "the first matching rule with a limit")
	assert.Equal(t, access.Limit{PerSecond: 10}, p.For(bob).Limit(), "the default")
	assert.Equal(t, "sub:alice", alice.Key())
	assert.Equal(t, "client:ci-bot", robot.Key())
	assert.Equal(t, "anonymous", anon.Key())
}

func TestParseInvalid(t *testing.T) {
	for _, in := range []string{
		`{"rules": [{"match": {"subject": "["}}]}`,
		`{"rules": [{"tools": {"deny": ["a[" ]}}]}`,
		`{"default": "maybe"}`,
		`{"rateLimit": {"perSecond": -1}}`,
		`{"rules": [{"rateLimit": {"burst": 3}}]}`,
		`{"rules": [{"macth": {}}]}`,
		`[{"servers": {"allow": "x"}}]`,
		`not json`,
	} {
		c, err := access.Parse([]byte(in))
		if err == nil {
			_, err = access.Compile(c)
		}
		assert.ErrorIs(t, err, access.ErrInvalidRules, in)
	}
	// The list form.
	c, err := access.Parse([]byte(`[{"match": {"subject": "a"}, "admin": true}]`))
	require.NoError(t, err)
	assert.Len(t, c.Rules, 1)
}

// clock is a manual clock for the limiter.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestLimiterRate(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	lm := access.NewLimiter(access.LimiterOptions{Now: clk.Now})
	l := access.Limit{PerSecond: 2, Burst: 3}
	for i := range 3 {
		release, err := lm.Acquire("a", l)
		require.NoError(t, err, "call %d within the burst", i)
		release()
	}
	_, err := lm.Acquire("a", l)
	require.ErrorIs(t, err, access.ErrRateLimited)
	var le *access.LimitError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, "rate", le.Kind)
	assert.Equal(t, 500*time.Millisecond, le.RetryAfter, "one token at 2/s")
	_, err = lm.Acquire("b", l)
	assert.NoError(t, err, "another caller has its own bucket")

	clk.Add(499 * time.Millisecond)
	_, err = lm.Acquire("a", l)
	require.ErrorAs(t, err, &le)
	assert.Equal(t, time.Millisecond, le.RetryAfter)
	clk.Add(time.Millisecond)
	_, err = lm.Acquire("a", l)
	assert.NoError(t, err, "allowed again after the wait it said")
}

func TestLimiterConcurrent(t *testing.T) {
	lm := access.NewLimiter(access.LimiterOptions{})
	l := access.Limit{Concurrent: 2}
	r1, err := lm.Acquire("a", l)
	require.NoError(t, err)
	r2, err := lm.Acquire("a", l)
	require.NoError(t, err)
	_, err = lm.Acquire("a", l)
	var le *access.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "concurrent", le.Kind)
	assert.Positive(t, le.RetryAfter)
	r1()
	r1() // a second release is a no-op
	r3, err := lm.Acquire("a", l)
	require.NoError(t, err)
	_, err = lm.Acquire("a", l)
	require.ErrorIs(t, err, access.ErrRateLimited, "the double release freed one slot only")
	r2()
	r3()
}

func TestLimiterBoundedMemory(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	lm := access.NewLimiter(access.LimiterOptions{Now: clk.Now, Idle: time.Minute, MaxKeys: 3})
	l := access.Limit{PerSecond: 1}
	held, err := lm.Acquire("busy", access.Limit{Concurrent: 1})
	require.NoError(t, err)
	for _, k := range []string{"a", "b"} {
		r, err := lm.Acquire(k, l)
		require.NoError(t, err)
		r()
	}
	_, err = lm.Acquire("c", l)
	require.ErrorIs(t, err, access.ErrRateLimited, "the table is full and nobody idle")
	assert.Equal(t, 3, lm.Len())

	clk.Add(time.Minute)
	r, err := lm.Acquire("c", l)
	require.NoError(t, err, "idle callers expired")
	r()
	assert.Equal(t, 2, lm.Len(), "busy (a call in flight) and c")
	held()
}

// BenchmarkAccessCheck is the access check of one call: the caller's
// grant under a policy of a few rules, the tool's verdict, and the rate
// limiter's acquire and release.
func BenchmarkAccessCheck(b *testing.B) {
	p, err := access.Compile(access.Config{
		RateLimit: &access.Limit{PerSecond: 1e9, Concurrent: 1000},
		Rules: []access.Rule{
			{Match: access.Match{Groups: "eng"}, Servers: access.Filter{Allow: []string{"github", "db*"}, Deny: []string{"db-prod"}}},
			{Match: access.Match{Groups: "oncall"}, Tools: access.Filter{Deny: []string{"mcp__github__delete_*"}}},
			{Match: access.Match{Subject: "bob"}, Servers: access.Filter{Allow: []string{"crm"}}},
			{Match: access.Match{ClientID: "ci-*"}, Servers: access.Filter{Allow: []string{"github"}}},
		}})
	require.NoError(b, err)
	lm := access.NewLimiter(access.LimiterOptions{})
	b.ReportAllocs()
	for b.Loop() {
		g := p.For(alice)
		if !g.Tool("github", "mcp__github__create_issue") {
			b.Fatal("refused")
		}
		release, err := lm.Acquire(alice.Key(), g.Limit())
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}
