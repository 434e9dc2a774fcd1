package oauth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Workload identity (SEP-1933): the workload's JWT, read afresh from its
// file, is the jwt-bearer assertion; no browser, no registration. A
// refused assertion is not sent again (nor another grant tried) until
// Login.
func TestWorkloadIdentity(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) {
		f.assertion, f.noDCR = "workload-jwt-1", true
		f.authMethods, f.grantTypes = []string{"none"}, []string{GrantJWTBearer}
		f.prmScopes = []string{"mcp"}
	})
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("workload-jwt-1\n"), 0o600))
	s := newSource(t, f, func(c *Config) {
		c.Grant, c.ClientID = GrantJWTBearer, "workload"
		c.Workload = &WorkloadConfig{TokenFile: file}
		c.UserAgent = nil
	})
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.tokenReqs, 1)
	form := f.tokenReqs[0]
	assert.Equal(t, GrantJWTBearer, form.Get("grant_type"))
	assert.Equal(t, "workload-jwt-1", form.Get("assertion"))
	assert.Equal(t, "workload", form.Get("client_id"))
	assert.Equal(t, f.mcpURL(), form.Get("resource"))
	assert.Equal(t, "mcp", form.Get("scope"))
	assert.Zero(t, f.count("GET /authorize"))

	// The platform rotated the file, to a token the server refuses.
	require.NoError(t, os.WriteFile(file, []byte("workload-jwt-2"), 0o600))
	f.expireAccess()
	for range 3 {
		resp, err := call(t, s, f.mcpURL())
		require.NoError(t, err)
		assert.Equal(t, 401, resp.StatusCode)
	}
	require.Len(t, f.tokenReqs, 2, "one refused request, not retried")
	assert.Equal(t, "workload-jwt-2", f.tokenReqs[1].Get("assertion"))
	assert.Equal(t, GrantJWTBearer, f.tokenReqs[1].Get("grant_type"), "no other grant tried")
	assert.Contains(t, s.Status().LastError, "invalid_grant")

	require.NoError(t, os.WriteFile(file, []byte("workload-jwt-1"), 0o600))
	require.NoError(t, s.Login(ctx(t), nil, ""), "login asks again")
	mustCall(t, s, f.mcpURL())
	assert.Len(t, f.tokenReqs, 3)

	require.NoError(t, os.Remove(file))
	f.expireAccess()
	_, err := call(t, s, f.mcpURL())
	assert.ErrorIs(t, err, ErrWorkloadToken)

	_, err = NewSource(Config{ServerURL: f.mcpURL(), Grant: GrantJWTBearer})
	assert.Error(t, err, "jwt-bearer needs an enterprise config or a workload token")
}

// A pre-registered confidential client of a server whose metadata offers
// client_credentials and not the code flow gets client_credentials, with
// no user agent; with a server that offers the code flow it keeps that.
func TestGrantFromTheServersMetadata(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) {
		f.grantTypes, f.authMethods = []string{"client_credentials"}, []string{"client_secret_basic"}
	})
	s := newSource(t, f, func(c *Config) { c.ClientID, c.ClientSecret, c.UserAgent = "svc", "svc-secret", nil })
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.tokenReqs, 1)
	assert.Equal(t, "client_credentials", f.tokenReqs[0].Get("grant_type"))
	assert.Zero(t, f.count("GET /authorize"))

	f = newFakeAS(t, func(f *fakeAS) {
		f.grantTypes, f.authMethods = []string{"authorization_code", "refresh_token", "client_credentials"}, []string{"client_secret_basic"}
	})
	s = newSource(t, f, func(c *Config) { c.ClientID, c.ClientSecret = "svc", "svc-secret" })
	mustCall(t, s, f.mcpURL())
	assert.Equal(t, 1, f.count("GET /authorize"))
	assert.Equal(t, "authorization_code", f.tokenReqs[0].Get("grant_type"))
}

// A client_credentials request the server refuses (invalid_client) is not
// sent again on every request: the server parks in needs-auth.
func TestRefusedMachineGrantIsNotRepeated(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.known = map[string]bool{} })
	s := newSource(t, f, func(c *Config) {
		c.Grant, c.ClientID, c.ClientSecret, c.UserAgent = GrantClientCredentials, "svc", "wrong", nil
	})
	for range 3 {
		resp, err := call(t, s, f.mcpURL())
		require.NoError(t, err)
		assert.Equal(t, 401, resp.StatusCode)
	}
	assert.Len(t, f.tokenReqs, 1)
	_, err := s.Token(ctx(t))
	assert.NoError(t, err)
	assert.Len(t, f.tokenReqs, 1, "nor on Token")
}
