package mcpvisor

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/transports"
)

// relayDials counts the connections the test kind "relay" opened.
var relayDials atomic.Int64

// Two kinds this test binary adds, as a transport package would, with one
// registration each: "relay" is remote and speaks OAuth, traced as udp
// (so that the spans' attribute can only come from its entry), and dials
// Streamable HTTP underneath; "openrelay" is the same without OAuth and
// without a network transport.
func init() {
	viaHTTP := func(count bool) transports.Dialer {
		return func(cfg transports.Config, o transports.DialOptions) (transports.Dial, error) {
			k, _ := transports.Lookup(transports.TypeHTTP)
			dial, err := k.Dial(cfg, o)
			if err != nil || !count {
				return dial, err
			}
			return func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
				relayDials.Add(1)
				return dial(ctx, r)
			}, nil
		}
	}
	transports.Register(transports.Kind{Type: "relay", Remote: true, Schemes: []string{"http", "https"},
		Authenticates: true, NetworkTransport: "udp", Dial: viaHTTP(true)})
	transports.Register(transports.Kind{Type: "openrelay", Remote: true, Schemes: []string{"http", "https"},
		Dial: viaHTTP(false)})
}

// A kind registered by a package the root never names is dialed,
// authorized and traced by its entry in the table alone: a server of kind
// "relay" behind an OAuth-protected mock connects through the relay's
// dial, gets a token (every request after the challenge carries it), and
// answers calls; its spans say udp, from the entry.
func TestRegisteredKindIsDialedAuthorizedAndTracedByItsEntry(t *testing.T) {
	as, u := protectedMock(t, mockserver.Options{Transport: mockserver.TransportHTTP}, 3600)
	var logs syncBuffer
	s := start(t, authOptions(&logs, true))
	before := relayDials.Load()
	setAndSettle(t, s, map[string]ServerConfig{"r": remoteServer("relay", u)})
	require.Equal(t, StateReady, statusOf(s, "r").State, statusOf(s, "r").LastError)
	res, err := call(t, s, "mcp__r__echo", "hi")
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Content[0].Text)
	assert.Greater(t, relayDials.Load(), before, "the connection went through the relay kind's dial")

	reqs := mcpRequests(as)
	require.NotEmpty(t, reqs)
	for i, r := range reqs[1:] {
		assert.True(t, r.Valid, "request %d (%s %s) without a valid bearer", i+1, r.Method, r.Path)
	}
	require.NotNil(t, statusOf(s, "r").Auth, "the relay kind authenticates, by its entry")
	assertNoTokensIn(t, logs.String(), as)

	pu, err := url.Parse(u)
	require.NoError(t, err)
	attrs := attribute.NewSet(serverAttributes("r", remoteServer("relay", u))...)
	for key, want := range map[attribute.Key]string{"mcpvisor.transport": "relay", "network.transport": "udp", "server.address": pu.Hostname()} {
		v, ok := attrs.Value(key)
		if assert.True(t, ok, key) {
			assert.Equal(t, want, v.Emit(), key)
		}
	}
	_, ok := attrs.Value("server.port")
	assert.True(t, ok, "a remote kind's spans carry the port")
}

// Which kinds go through OAuth, and what their spans carry, is read from
// the table: the kinds mcpvisor ships answer as the lists they replace
// did, the test kinds as they registered, an unknown kind not at all (and
// it does not dial: ErrUnsupportedTransport).
func TestKindsAuthorizeAndTraceAsRegistered(t *testing.T) {
	o := &runOptions{}
	for _, tc := range []struct {
		cfg        ServerConfig
		authorizes bool
		network    string // "" none
		peer       bool   // server.address and server.port
	}{
		{ServerConfig{Config: transports.Config{Command: "x"}}, false, "pipe", false},
		{remoteServer("", "https://h.example/mcp"), true, "tcp", true},
		{remoteServer(transports.TypeHTTP, "https://h.example/mcp"), true, "tcp", true},
		{remoteServer(transports.TypeSSE, "https://h.example/sse"), true, "tcp", true},
		{remoteServer(transports.TypeWS, "wss://h.example/ws"), true, "tcp", true},
		{ServerConfig{Config: transports.Config{Type: transports.TypeSDK}}, false, "", false},
		{remoteServer("relay", "https://h.example/mcp"), true, "udp", true},
		{remoteServer("openrelay", "https://h.example/mcp"), false, "", true},
		{remoteServer("grpc", "https://h.example/mcp"), false, "", false},
	} {
		name := string(tc.cfg.Kind())
		assert.Equal(t, tc.authorizes, authorizes(&tc.cfg, o), "authorizes %s", name)
		attrs := attribute.NewSet(serverAttributes("s", tc.cfg)...)
		v, ok := attrs.Value("network.transport")
		assert.Equal(t, tc.network != "", ok, "network.transport of %s", name)
		assert.Equal(t, tc.network, v.Emit(), "network.transport of %s", name)
		port, ok := attrs.Value("server.port")
		assert.Equal(t, tc.peer, ok, "server.port of %s", name)
		if tc.peer {
			assert.Equal(t, int64(443), port.AsInt64(), "the default port of %s's https or wss URL", name)
		}
	}

	// The OAuth resource of a ws server is its http twin, by the ws kind's
	// entry.
	res, err := oauth.CanonicalResource("wss://H.example/mcp/")
	require.NoError(t, err)
	assert.Equal(t, "https://h.example/mcp", res)

	_, err = dialer(remoteServer("grpc", "https://h.example/mcp"), dialConfig{})
	assert.True(t, errors.Is(err, ErrUnsupportedTransport), "%v", err)
	_, err = dialer(ServerConfig{Config: transports.Config{Type: transports.TypeSDK}}, dialConfig{})
	var cfgErr *transports.ConfigError
	assert.True(t, errors.As(err, &cfgErr), "an sdk server with no in-process server fails at once: %v", err)
}
