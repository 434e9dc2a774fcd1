package config

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Two kinds this test binary registers, as a transport package would:
// "relay", remote, with URL schemes of its own (relay and relays, the
// twins of http and https), and "shell", started from a command. Neither
// is dialed here.
func init() {
	noDial := func(transports.Config, transports.DialOptions) (transports.Dial, error) {
		return func(context.Context, transports.Receiver) (transports.Conn, error) {
			return nil, errors.New("the test kinds are not dialed")
		}, nil
	}
	transports.Register(transports.Kind{Type: "relay", Remote: true, Schemes: []string{"relay", "relays"},
		HTTPSchemes: map[string]string{"relay": "http", "relays": "https"}, Dial: noDial})
	transports.Register(transports.Kind{Type: "shell", Command: true, Dial: noDial})
}

// The managed policy matches a server by its kind's entry in the table:
// a remote kind's URL against serverUrl (its schemes' default ports from
// their HTTP twins), a command kind's command line against serverCommand,
// and neither against the other.
func TestServerPolicyMatchesRegisteredKinds(t *testing.T) {
	byURL := func(p string) PolicyEntry { return PolicyEntry{ServerURL: p} }
	exact := func(argv ...string) PolicyEntry { return PolicyEntry{ServerCommand: CommandPattern{Exact: argv}} }
	shell := mcpvisor.ServerConfig{Config: transports.Config{Type: "shell", Command: "run", Args: []string{"x"}}}
	for _, tt := range []struct {
		name  string
		entry PolicyEntry
		sc    mcpvisor.ServerConfig
		want  bool
	}{
		{"url of a remote kind", byURL("relays://h.example/*"), remote("relay", "relays://h.example/mcp"), true},
		{"its default port", byURL("relays://h.example:443/*"), remote("relay", "relays://h.example/mcp"), true},
		{"its other default port", byURL("relay://h.example:80/*"), remote("relay", "relay://h.example/mcp"), true},
		{"a port that is not the default", byURL("relays://h.example/*"), remote("relay", "relays://h.example:8443/mcp"), false},
		{"a command entry never matches it", exact("relays://h.example/mcp"), remote("relay", "relays://h.example/mcp"), false},
		{"command of a command kind", exact("run", "x"), shell, true},
		{"a url entry never matches it", byURL("*://*"), shell, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Denied: []PolicyEntry{tt.entry}}
			require.NoError(t, p.Validate())
			ok, reason := p.Check("s", tt.sc)
			assert.Equal(t, tt.want, !ok, "denied; reason %q", reason)
		})
	}
}
