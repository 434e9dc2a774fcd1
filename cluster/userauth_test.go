package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// The gateway serves its authorization pages on a member: a member is a
// gateway.UserAuthorizer.
var _ gateway.UserAuthorizer = (*Member)(nil)

// TestPrincipalAndAuthorizationCrossTheWire: a call's principal (id,
// name, current access token) and an owner's AuthorizationRequiredError
// survive the protobuf encoding between members: the owner's context has
// the principal, and the caller gets the error typed, with its server,
// principal, flow, URL and expiry, matching ErrAuthorizationRequired,
// and a message without the URL.
func TestPrincipalAndAuthorizationCrossTheWire(t *testing.T) {
	ctx := mcpvisor.WithPrincipal(context.Background(), mcpvisor.Principal{ID: "https://issuer#alice", Name: "alice",
		AccessToken: func() string { return "alice-token" }})
	b, err := proto.Marshal(&wire.CallTool{Server: "mail", Tool: "echo", Principal: principalOf(ctx)})
	require.NoError(t, err)
	var call wire.CallTool
	require.NoError(t, proto.Unmarshal(b, &call))
	p, ok := mcpvisor.PrincipalFrom(withWirePrincipal(context.Background(), call.GetPrincipal()))
	require.True(t, ok)
	assert.Equal(t, "https://issuer#alice", p.ID)
	assert.Equal(t, "alice", p.Name)
	require.NotNil(t, p.AccessToken)
	assert.Equal(t, "alice-token", p.AccessToken())
	// No principal: none on the owner either.
	_, ok = mcpvisor.PrincipalFrom(withWirePrincipal(context.Background(), principalOf(context.Background())))
	assert.False(t, ok)

	expires := time.UnixMilli(time.Now().Add(10 * time.Minute).UnixMilli())
	owner := &mcpvisor.AuthorizationRequiredError{Server: "mail", Principal: p.ID, Flow: "flow-1",
		URL: "https://gw.example/oauth/authorize?flow=flow-1", Expires: expires}
	b, err = proto.Marshal(resultOf(fmt.Errorf("calling: %w", owner)))
	require.NoError(t, err)
	var r wire.CallResult
	require.NoError(t, proto.Unmarshal(b, &r))
	assert.False(t, retryable(&r))
	got := errorOf("mail", &r)
	require.ErrorIs(t, got, mcpvisor.ErrAuthorizationRequired)
	var ar *mcpvisor.AuthorizationRequiredError
	require.True(t, errors.As(got, &ar))
	assert.Equal(t, *owner, *ar)
	assert.NotContains(t, got.Error(), owner.URL)
	assert.NotContains(t, r.GetMessage(), owner.URL)

	// The other per-user refusals keep their sentinels.
	for _, sentinel := range []error{mcpvisor.ErrNoSubjectToken, mcpvisor.ErrNoUserRedirect} {
		b, err = proto.Marshal(resultOf(fmt.Errorf("server %q: %w", "ledger", sentinel)))
		require.NoError(t, err)
		var r wire.CallResult
		require.NoError(t, proto.Unmarshal(b, &r))
		require.ErrorIs(t, errorOf("ledger", &r), sentinel)
	}
}
