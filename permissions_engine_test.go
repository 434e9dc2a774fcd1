package mcpvisor

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// The order of evaluation: deny beats ask beats allow, whatever the
// rules' order or specificity; then the trust level.
func TestPermissionRulesDecide(t *testing.T) {
	r := PermissionRules{
		Allow: []string{"mcp__a__*", "mcp__b__delete_tmp", "mcp__w__get_*"},
		Ask:   []string{"mcp__*__delete_*"},
		Deny:  []string{"mcp__a__drop", "mcp__b__delete_tmp"},
	}
	for _, tc := range []struct {
		name, trust string
		want        string
		why         string
	}{
		{"mcp__a__read", "", decisionAllow, `allow rule "mcp__a__*"`},
		{"mcp__a__drop", "", decisionDeny, `deny rule "mcp__a__drop"`},                     // deny beats a broader allow
		{"mcp__a__delete_x", "", decisionAsk, `ask rule "mcp__*__delete_*"`},               // ask beats allow
		{"mcp__b__delete_tmp", "", decisionDeny, `deny rule "mcp__b__delete_tmp"`},         // deny beats an equally specific allow and ask
		{"mcp__c__read", "", decisionAllow, ""},                                            // no rule, default trust
		{"mcp__c__read", TrustTrusted, decisionAllow, ""},                                  // no rule
		{"mcp__c__read", TrustSandbox, decisionAllow, ""},                                  // no rule
		{"mcp__w__read", TrustUntrusted, decisionAsk, `the server's trust is "untrusted"`}, // no rule: trust asks
		{"mcp__w__get_x", TrustUntrusted, decisionAllow, `allow rule "mcp__w__get_*"`},     // an allow rule exempts
		{"mcp__w__delete_x", TrustUntrusted, decisionAsk, `ask rule "mcp__*__delete_*"`},
	} {
		got, why := r.Decide(tc.name, tc.trust)
		assert.Equal(t, tc.want, got, "%s at trust %q", tc.name, tc.trust)
		assert.Equal(t, tc.why, why, "%s at trust %q", tc.name, tc.trust)
	}
	var none PermissionRules
	d, _ := none.Decide("mcp__x__y", "")
	assert.Equal(t, decisionAllow, d)
	assert.Error(t, PermissionRules{Allow: []string{"mcp__[x"}}.Validate())
	assert.Equal(t, TrustUntrusted, LeastTrusted(TrustTrusted, TrustUntrusted))
	assert.Equal(t, TrustSandbox, LeastTrusted("", TrustSandbox))
	assert.Equal(t, "", LeastTrusted(TrustTrusted, ""))
}

// BenchmarkPermissionDecide measures the permission check of a call
// against n rules of each kind, none matching (the worst case: every
// pattern is tried).
func BenchmarkPermissionDecide(b *testing.B) {
	for _, n := range []int{0, 10, 100} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var r PermissionRules
			for i := range n {
				r.Allow = append(r.Allow, fmt.Sprintf("mcp__srv%d__*", i))
				r.Ask = append(r.Ask, fmt.Sprintf("mcp__*__ask_%d_*", i))
				r.Deny = append(r.Deny, fmt.Sprintf("mcp__*__deny_%d", i))
			}
			b.Run("uncached", func(b *testing.B) {
				for b.Loop() {
					r.Decide("mcp__github__create_issue", "")
				}
			})
			b.Run("cached", func(b *testing.B) {
				set := newPermissionSet(r)
				for b.Loop() {
					set.decide("mcp__github__create_issue", "")
				}
			})
		})
	}
}

// The remembered decisions are the rules' own, and safe under concurrent
// calls (run with -race).
func TestPermissionSetRemembersConcurrently(t *testing.T) {
	r := PermissionRules{Ask: []string{"mcp__*__delete_*"}, Deny: []string{"mcp__x__*"}}
	set := newPermissionSet(r)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("mcp__s%d__delete_%d", g, i%20)
				for _, trust := range []string{"", TrustTrusted, TrustUntrusted, TrustSandbox, "bogus"} {
					d, why := set.decide(name, trust)
					wd, wwhy := r.Decide(name, trust)
					if d != wd || why != wwhy {
						t.Errorf("%s at %q: remembered %s (%s), the rules say %s (%s)", name, trust, d, why, wd, wwhy)
						return
					}
				}
			}
		})
	}
	testwait.Call(t, "every concurrent decision", wg.Wait)
	d, _ := set.decide("mcp__x__read", TrustTrusted)
	assert.Equal(t, decisionDeny, d)
}
