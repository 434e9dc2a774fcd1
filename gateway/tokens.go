package gateway

import (
	"encoding/json"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Token estimates of tool definitions: what a client's model pays to be
// told of the tools. The estimate is the length of the definitions' JSON
// (as tools/list sends them) in bytes divided by 4, the usual rule of
// thumb for English text and JSON under the common tokenizers; it is an
// estimate, not any model's count.

// bytesPerToken is the divisor of the estimate.
const bytesPerToken = 4

// EstimateTokens returns the estimated tokens of tool definitions: the
// bytes of their JSON divided by 4.
func EstimateTokens(defs ...protocol.Tool) int {
	n := 0
	for i := range defs {
		b, err := json.Marshal(defs[i])
		if err == nil {
			n += len(b)
		}
	}
	return n / bytesPerToken
}

// toolTokens estimates the definitions of the pool's tools the gateway
// offers (offered: Allow/Deny), by server, and their total; deferred servers'
// tools count too (what they would cost listed).
func toolTokens(pool []mcpvisor.Tool, offered func(name string) bool) (byServer map[string]int, total int) {
	bytes := map[string]int{}
	for _, t := range pool {
		if !offered(t.Name) {
			continue
		}
		b, err := json.Marshal(t.Definition)
		if err == nil {
			bytes[t.Server] += len(b)
		}
	}
	byServer = make(map[string]int, len(bytes))
	for s, n := range bytes {
		byServer[s] = n / bytesPerToken
		total += n
	}
	return byServer, total / bytesPerToken
}
