package oauth

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// NewSource refuses a token exchange config without a subject token or
// without a confidential pre-registered client.
func TestTokenExchangeConfig(t *testing.T) {
	_, pemKey := genKey(t)
	subject := func(context.Context) (string, error) { return "s", nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"secret", Config{ClientID: "gw", ClientSecret: "x", SubjectToken: subject}, true},
		{"private key", Config{ClientID: "gw", PrivateKeyPEM: pemKey, SubjectToken: subject}, true},
		{"memory store", Config{ClientID: "gw", ClientSecret: "x", SubjectToken: subject, Store: &MemoryStore{}}, true},
		{"no subject token", Config{ClientID: "gw", ClientSecret: "x"}, false},
		{"no client", Config{ClientSecret: "x", SubjectToken: subject}, false},
		{"public client", Config{ClientID: "gw", SubjectToken: subject}, false},
		{"file store (not used)", Config{ClientID: "gw", ClientSecret: "x", SubjectToken: subject,
			Store: &FileStore{Path: filepath.Join(t.TempDir(), "t.json")}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ServerURL, tc.cfg.Grant = "https://mcp.example/mcp", GrantTokenExchange
			_, err := NewSource(tc.cfg)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidConfig)
			}
		})
	}
}

// The token endpoint's refusals: invalid_grant and unauthorized_client
// are the subject token's (or client's) rejection, the others the
// server's plain error; none means "log in", and none repeats the subject
// token even when the server echoed it.
func TestExchangeRefusal(t *testing.T) {
	const subject = "eyJsubject.token.value"
	for code, rejected := range map[string]bool{
		"invalid_grant": true, "unauthorized_client": true,
		"invalid_target": false, "invalid_scope": false, "invalid_request": false, "invalid_client": false,
	} {
		oe := &Error{Endpoint: "token", StatusCode: 400, Code: code, Description: "bad " + subject, Err: ErrNeedsLogin}
		err := exchangeRefusal(oe, subject)
		assert.Equal(t, rejected, errors.Is(err, ErrSubjectTokenRejected), code)
		assert.NotErrorIs(t, err, ErrNeedsLogin, code)
		var got *Error
		require.ErrorAs(t, err, &got, code)
		assert.Equal(t, code, got.Code)
		assert.NotContains(t, err.Error(), subject, code)
		assert.Contains(t, oe.Description, subject, "the original is left as it was")
	}
}

// What an exchange may issue: an access token (or a JWT one), said or
// not; anything else is refused.
func TestCheckExchanged(t *testing.T) {
	for _, tc := range []struct {
		issued, tokenType string
		ok                bool
	}{
		{"", "Bearer", true},
		{TokenTypeAccessToken, "Bearer", true},
		{TokenTypeAccessToken, "DPoP", true},
		{TokenTypeJWT, "bearer", true},
		{TokenTypeIDToken, "Bearer", false},
		{"urn:ietf:params:oauth:token-type:refresh_token", "Bearer", false},
		{"urn:ietf:params:oauth:token-type:id-jag", "N_A", false},
		{TokenTypeAccessToken, "N_A", false},
		{"", "n_a", false},
	} {
		err := checkExchanged(&tokenResponse{IssuedTokenType: tc.issued, TokenType: tc.tokenType})
		if tc.ok {
			assert.NoError(t, err, "%+v", tc)
			continue
		}
		var oe *Error
		require.ErrorAs(t, err, &oe, "%+v", tc)
		assert.Equal(t, "invalid_response", oe.Code)
	}
}

// The exchange against the fake server: the request's parameters, no
// refresh token kept though the server gave one, nothing written to the
// configured file store, a new exchange with the
// current subject token when the resource refuses the token (401), a
// refused subject token not presented again, and an issued token that is
// not an access token refused.
func TestTokenExchangeFlow(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) {
		f.noDCR, f.prmScopes = true, []string{"mcp"}
		f.authMethods = []string{AuthMethodPost}
		f.subjects = map[string]bool{"alice-1": true, "alice-2": true}
	})
	var mu sync.Mutex
	current, asked := "alice-1", 0
	file := filepath.Join(t.TempDir(), "tokens.json")
	s := newSource(t, f, func(c *Config) {
		c.Grant, c.ClientID, c.ClientSecret, c.Audience = GrantTokenExchange, "gw", "gw-secret", "upstream"
		c.UserAgent = nil
		c.Store = &FileStore{Path: file} // not used: exchanged tokens stay in memory
		c.SubjectToken = func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			asked++
			return current, nil
		}
	})
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.tokenReqs, 1)
	form := f.tokenReqs[0]
	assert.Equal(t, GrantTokenExchange, form.Get("grant_type"))
	assert.Equal(t, "alice-1", form.Get("subject_token"))
	assert.Equal(t, TokenTypeAccessToken, form.Get("subject_token_type"))
	assert.Equal(t, TokenTypeAccessToken, form.Get("requested_token_type"))
	assert.Equal(t, f.mcpURL(), form.Get("resource"))
	assert.Equal(t, "upstream", form.Get("audience"))
	assert.Equal(t, "mcp", form.Get("scope"))
	assert.Equal(t, "gw", form.Get("client_id"))
	assert.Equal(t, "gw-secret", form.Get("client_secret"))
	assert.False(t, s.Status().HasRefresh, "the refresh token the server gave is not kept")
	assert.NoFileExists(t, file, "exchanged tokens are not persisted")
	assert.Zero(t, f.count("GET /authorize"))

	// The resource refuses the token: exchanged again, with the caller's
	// current token.
	mu.Lock()
	current = "alice-2"
	mu.Unlock()
	f.expireAccess()
	mustCall(t, s, f.mcpURL())
	require.Len(t, f.tokenReqs, 2)
	assert.Equal(t, "alice-2", f.tokenReqs[1].Get("subject_token"))
	assert.Empty(t, f.tokenReqs[1].Get("refresh_token"))
	assert.Equal(t, 2, asked)

	// Concurrent requests refused together: one exchange (single-flight).
	f.expireAccess()
	var wg sync.WaitGroup
	statuses := make(chan int, 10)
	for range 10 {
		wg.Go(func() {
			resp, err := call(t, s, f.mcpURL())
			if assert.NoError(t, err) {
				statuses <- resp.StatusCode
			}
		})
	}
	testwait.Call(t, "the concurrent calls", wg.Wait)
	close(statuses)
	for st := range statuses {
		assert.Equal(t, http.StatusOK, st)
	}
	require.Len(t, f.tokenReqs, 3, "one exchange for ten refused requests")
	assert.Equal(t, 3, asked)

	// A refused subject token: typed, not presented again.
	mu.Lock()
	current = "alice-3"
	mu.Unlock()
	f.expireAccess()
	for range 3 {
		_, err := call(t, s, f.mcpURL())
		require.ErrorIs(t, err, ErrSubjectTokenRejected)
		assert.NotContains(t, err.Error(), "alice-3")
	}
	assert.Len(t, f.tokenReqs, 4, "one refused request")
	assert.NotContains(t, s.Status().LastError, "alice-3")

	// An exchange that issues something else than an access token.
	f.mu.Lock()
	f.subjects["alice-4"], f.issuedType = true, TokenTypeIDToken
	f.mu.Unlock()
	mu.Lock()
	current = "alice-4"
	mu.Unlock()
	_, err := call(t, s, f.mcpURL())
	var oe *Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "invalid_response", oe.Code)
}
