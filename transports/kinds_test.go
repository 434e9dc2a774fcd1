package transports_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
	_ "github.com/mcpvisor/mcpvisor/transports/inproc"
	_ "github.com/mcpvisor/mcpvisor/transports/sse"
	_ "github.com/mcpvisor/mcpvisor/transports/stdio"
	_ "github.com/mcpvisor/mcpvisor/transports/streamable"
	_ "github.com/mcpvisor/mcpvisor/transports/ws"
)

// The registered kinds answer what the hand-written lists they replace
// answered: stdio started from a command and traced as a pipe; http, sse
// and ws remote, authorized by OAuth, traced as tcp, ws also taking ws and
// wss URLs that name their http twin; sdk none of these. A kind whose
// registration drifts from these fails here.
func TestRegisteredKindsAnswerTheOldLists(t *testing.T) {
	type want struct {
		label            string
		command, remote  bool
		schemes          []string
		authenticates    bool
		networkTransport string
	}
	old := map[transports.Type]want{
		transports.TypeStdio: {label: "stdio", command: true, networkTransport: "pipe"},
		transports.TypeHTTP:  {label: "HTTP", remote: true, schemes: []string{"http", "https"}, authenticates: true, networkTransport: "tcp"},
		transports.TypeSSE:   {label: "SSE", remote: true, schemes: []string{"http", "https"}, authenticates: true, networkTransport: "tcp"},
		transports.TypeWS:    {label: "WebSocket", remote: true, schemes: []string{"http", "https", "ws", "wss"}, authenticates: true, networkTransport: "tcp"},
		transports.TypeSDK:   {label: "in-process"},
	}
	var names []transports.Type
	for _, k := range transports.Kinds() {
		names = append(names, k.Type)
		w, ok := old[k.Type]
		require.True(t, ok, "kind %q is registered but not known to this test", k.Type)
		assert.Equal(t, w, want{k.Name(), k.Command, k.Remote, k.Schemes, k.Authenticates, k.NetworkTransport}, "kind %q", k.Type)
		assert.NotNil(t, k.Dial, "kind %q", k.Type)

		cfg := transports.Config{Type: k.Type}
		assert.Equal(t, k.Type == transports.TypeStdio || k.Type == transports.TypeSDK, cfg.IsLocal(), "IsLocal of %q", k.Type)
	}
	// The order of the messages that list them ("want stdio, http, sse,
	// ws or sdk").
	assert.Equal(t, []transports.Type{"stdio", "http", "sse", "ws", "sdk"}, names)
	assert.Equal(t, "stdio, http, sse, ws or sdk", transports.KindList(transports.Kinds()))

	for scheme, h := range map[string]string{"ws": "http", "wss": "https", "http": "http", "https": "https", "ftp": "ftp"} {
		assert.Equal(t, h, transports.HTTPScheme(scheme), scheme)
	}
	for scheme, p := range map[string]string{"ws": "80", "http": "80", "wss": "443", "https": "443", "ftp": ""} {
		assert.Equal(t, p, transports.DefaultPort(scheme), scheme)
	}
	k, ok := transports.Lookup("WS")
	require.True(t, ok, "Lookup ignores case, as Config.Kind does")
	assert.Equal(t, transports.TypeWS, k.Type)
	_, ok = transports.Lookup("grpc")
	assert.False(t, ok)
}

// Config.Validate reads the table: what each kind needs, and the list of
// kinds in the message for an unknown one.
func TestValidateReadsTheTable(t *testing.T) {
	for _, tc := range []struct {
		cfg     transports.Config
		wantErr string
	}{
		{transports.Config{Command: "x"}, ""},
		{transports.Config{Type: "stdio"}, `stdio server needs "command"`},
		{transports.Config{URL: "http://h"}, ""},
		{transports.Config{Type: "sse"}, `sse server needs "url"`},
		{transports.Config{Type: "WS", URL: "ws://h"}, ""},
		{transports.Config{Type: "sdk"}, ""},
		{transports.Config{Type: "sdk", Sandbox: &transports.Sandbox{Enabled: true}}, `invalid sandbox: "sandbox" confines stdio servers only, and this one is sdk`},
		{transports.Config{}, `server needs "command" (stdio) or "url" (remote)`},
		{transports.Config{Type: "grpc", URL: "http://h"}, `unknown transport type "grpc" (want stdio, http, sse, ws or sdk)`},
	} {
		err := tc.cfg.Validate()
		if tc.wantErr == "" {
			assert.NoError(t, err, "%+v", tc.cfg)
		} else {
			assert.EqualError(t, err, tc.wantErr, "%+v", tc.cfg)
		}
	}
}

// Register refuses, by panicking, what can only be a programmer's
// mistake: a second kind of one name, a kind without a name or a dial, a
// remote kind without a URL scheme.
func TestRegisterRefusesMistakes(t *testing.T) {
	dial := func(transports.Config, transports.DialOptions) (transports.Dial, error) {
		return nil, errors.New("not dialed")
	}
	assert.PanicsWithValue(t, `transports: Register: kind "http" registered twice`, func() {
		transports.Register(transports.Kind{Type: transports.TypeHTTP, Remote: true, Schemes: []string{"http"}, Dial: dial})
	})
	assert.Panics(t, func() { transports.Register(transports.Kind{Dial: dial}) })
	assert.Panics(t, func() { transports.Register(transports.Kind{Type: "Upper", Dial: dial}) })
	assert.Panics(t, func() { transports.Register(transports.Kind{Type: "nodial"}) })
	assert.Panics(t, func() { transports.Register(transports.Kind{Type: "noscheme", Remote: true, Dial: dial}) })
	_, ok := transports.Lookup("nodial")
	assert.False(t, ok, "a refused kind is not registered")
}

// Extra finds the value of the type asked for among DialOptions.Extras.
func TestExtra(t *testing.T) {
	type a struct{ n int }
	type b struct{ s string }
	o := transports.DialOptions{Extras: []any{b{"x"}, a{1}, a{2}}}
	got, ok := transports.Extra[a](o)
	assert.True(t, ok)
	assert.Equal(t, a{1}, got)
	_, ok = transports.Extra[context.Context](o)
	assert.False(t, ok)
}
