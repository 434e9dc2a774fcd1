package mcpvisor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpvisor/mcpvisor/transports"
)

func TestRedactHidesSecretsAndKeepsTheRest(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"", ""},
		{"https://example.com/mcp", "https://example.com/mcp"},
		{"https://bob:pw@example.com/mcp?key=k&b=2#top", "https://[redacted]@example.com/mcp?b=[redacted]&key=[redacted]#top"},
		{"https://ghp_token@example.com/x=y", "https://[redacted]@example.com/x=y"},
		{"mailto:secret", Redacted},
	} {
		assert.Equal(t, tt.want, redactURL(tt.url), tt.url)
	}
	got := redact(ServerConfig{Config: transports.Config{Command: "srv",
		Args: []string{"--token", "t1", "--api-key=k2", "--verbose", "plain", "--port=8", "-p", "x"},
		Env:  map[string]string{"A": "v"}, Headers: map[string]string{"Authorization": "Bearer h"}}})
	assert.Equal(t, StatusConfig{Type: "stdio", Command: "srv",
		Args: []string{"--token", Redacted, "--api-key=" + Redacted, "--verbose", "plain", "--port=8", "-p", "x"},
		Env:  map[string]string{"A": Redacted}, Headers: map[string]string{"Authorization": Redacted}}, got)
}
