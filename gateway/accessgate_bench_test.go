package gateway_test

import (
	"testing"

	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
)

// BenchmarkGatewayHandlerAccess is BenchmarkGatewayHandler with access
// rules (four rules, the caller matched by one) and a rate limit (high
// enough never to refuse): side by side with BenchmarkGatewayHandler, the
// added CPU of the access check and the limiter per call.
func BenchmarkGatewayHandlerAccess(b *testing.B) {
	p, err := access.Compile(access.Config{
		RateLimit: &access.Limit{PerSecond: 1e12, Concurrent: 1 << 20},
		Rules: []access.Rule{
			{Match: access.Match{Groups: "eng"}, Servers: access.Filter{Allow: []string{"github", "db*"}, Deny: []string{"db-prod"}}},
			{Match: access.Match{Subject: "bob"}, Servers: access.Filter{Allow: []string{"crm"}}},
			{Match: access.Match{ClientID: "ci-*"}, Servers: access.Filter{Allow: []string{"github"}}},
			{Servers: access.Filter{Allow: []string{"m"}}, Tools: access.Filter{Deny: []string{"mcp__m__delete_*"}}},
		}})
	if err != nil {
		b.Fatal(err)
	}
	benchHandler(b, gateway.Options{Access: p}, "")
}
