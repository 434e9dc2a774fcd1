package oauth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
)

// dpopFake is the DPoP side of fakeAS: an authorization server that binds
// tokens to the key of a valid proof at its token endpoint, and a
// resource that verifies every proof it is sent (signature by the
// embedded key, typ, alg, htm, htu, iat, a jti never seen before, ath,
// and the key the token is bound to), optionally demanding nonces.
// Guarded by fakeAS.mu.
type dpopFake struct {
	algs      []string // dpop_signing_alg_values_supported (nil: omitted)
	challenge bool     // the resource answers a request without a token with a DPoP challenge
	asNonce   string   // nonce the token endpoint demands ("": none)
	rsNonce   string   // nonce the resource demands ("": none)

	bound map[string]string // access token → thumbprint of its key
	jtis  map[string]bool   // proof ids seen by the resource

	tokenProofs    []string // thumbprints of the valid proofs at the token endpoint
	asChallenges   int      // use_dpop_nonce answers of the token endpoint
	rsChallenges   int      // use_dpop_nonce answers of the resource
	served         int      // requests the resource served with a DPoP-bound token
	bearerForBound int      // bound tokens presented as Bearer
	problems       []string // invalid proofs, replays
}

// dpopTokenRequest checks the DPoP proof of a token request (none: a
// Bearer token is issued). It returns the thumbprint to bind, or answers
// the request itself (an invalid proof, a nonce demanded). Called with
// f.mu held.
func (f *fakeAS) dpopTokenRequest(w http.ResponseWriter, r *http.Request) (jkt string, answered bool) {
	proof := r.Header.Get("DPoP")
	if proof == "" {
		return "", false
	}
	p, err := oauthtest.VerifyDPoPProof(proof, http.MethodPost, "http://"+r.Host+r.URL.Path, "")
	if err != nil {
		f.dpop.problems = append(f.dpop.problems, "token endpoint: "+err.Error())
		writeJSON(w, 400, map[string]string{"error": "invalid_dpop_proof", "error_description": err.Error()})
		return "", true
	}
	if f.dpop.asNonce != "" && p.Nonce != f.dpop.asNonce {
		f.dpop.asChallenges++
		w.Header().Set("DPoP-Nonce", f.dpop.asNonce)
		writeJSON(w, 400, map[string]string{"error": "use_dpop_nonce"})
		return "", true
	}
	f.dpop.tokenProofs = append(f.dpop.tokenProofs, p.JKT)
	return p.JKT, false
}

// dpopResource serves the resource's DPoP side: a request with a
// DPoP-bound token (verified), a bound token presented as Bearer
// (refused), or, when the resource demands DPoP, a request without a
// token (the DPoP challenge). It reports whether it answered.
func (f *fakeAS) dpopResource(w http.ResponseWriter, r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	f.mu.Lock()
	defer f.mu.Unlock()
	challenge := func(params string) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP algs="ES256", resource_metadata="%s"%s`, f.prmURL(), params))
		writeJSON(w, 401, map[string]string{"error": "invalid_token"})
	}
	scheme, tok, _ := strings.Cut(auth, " ")
	switch {
	case strings.EqualFold(scheme, "DPoP"):
		jkt, bound := f.dpop.bound[tok]
		if _, live := f.access[tok]; !bound || !live {
			challenge(`, error="invalid_token"`)
			return true
		}
		p, err := oauthtest.VerifyDPoPProof(r.Header.Get("DPoP"), r.Method, "http://"+r.Host+r.URL.Path, tok)
		switch {
		case err != nil:
			f.dpop.problems = append(f.dpop.problems, "resource: "+err.Error())
		case p.JKT != jkt:
			f.dpop.problems = append(f.dpop.problems, "resource: the proof's key is not the token's")
		case f.dpop.jtis[p.JTI]:
			f.dpop.problems = append(f.dpop.problems, "resource: a proof was replayed")
		}
		if err != nil || p.JKT != jkt {
			challenge(`, error="invalid_dpop_proof"`)
			return true
		}
		f.dpop.jtis[p.JTI] = true
		if f.dpop.rsNonce != "" && p.Nonce != f.dpop.rsNonce {
			f.dpop.rsChallenges++
			w.Header().Set("DPoP-Nonce", f.dpop.rsNonce)
			challenge(`, error="use_dpop_nonce"`)
			return true
		}
		f.dpop.served++
		writeJSON(w, 200, map[string]string{"ok": "yes"})
		return true
	case strings.EqualFold(scheme, "Bearer") && f.dpop.bound[tok] != "":
		f.dpop.bearerForBound++
		challenge(`, error="invalid_token"`)
		return true
	case auth == "" && f.dpop.challenge:
		challenge("")
		return true
	}
	return false
}

func (f *fakeAS) dpopState() dpopFake {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.dpop
	d.tokenProofs = append([]string(nil), d.tokenProofs...)
	d.problems = append([]string(nil), d.problems...)
	return d
}

// A resource that answers with a DPoP challenge gets DPoP-bound tokens:
// a proof at the token endpoint, the DPoP scheme and a fresh proof on
// every request; the key is kept with the token (a second source on the
// same store uses both without a new token), and a refresh keeps the
// binding.
func TestDPoPBoundTokens(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) { f.dpop.algs, f.dpop.challenge = []string{"ES256"}, true })
	store := &FileStore{Path: filepath.Join(t.TempDir(), "tokens.json")}
	s := newSource(t, f, func(c *Config) { c.Store = store })
	mustCall(t, s, f.mcpURL())
	mustCall(t, s, f.mcpURL())
	d := f.dpopState()
	assert.Empty(t, d.problems)
	require.Len(t, d.tokenProofs, 1, "one token request, with a valid proof")
	assert.Equal(t, 2, d.served, "both requests carried the token as DPoP with a fresh proof")
	assert.Zero(t, d.bearerForBound)

	e, err := store.Load(ctx(t), s.ServerURL(), f.issuer())
	require.NoError(t, err)
	require.NotNil(t, e.Token)
	assert.Equal(t, "DPoP", e.Token.TokenType)
	assert.NotEmpty(t, e.Token.DPoPKey, "the key is persisted with the token")
	assert.True(t, s.Status().DPoP)

	again := newSource(t, f, func(c *Config) { c.Store = store; c.UserAgent = nil })
	mustCall(t, again, f.mcpURL())
	assert.Len(t, f.dpopState().tokenProofs, 1, "the stored token and key were used: no new token")

	f.expireAccess()
	mustCall(t, again, f.mcpURL())
	d = f.dpopState()
	require.Len(t, d.tokenProofs, 2, "the refresh carried a proof")
	assert.Equal(t, d.tokenProofs[0], d.tokenProofs[1], "the refresh keeps the token's key")
	assert.Equal(t, "refresh_token", f.tokenReqs[len(f.tokenReqs)-1].Get("grant_type"))
	assert.Empty(t, d.problems)
}

// Nonces demanded by the token endpoint (RFC 9449 §8) and the resource
// (§9) are honoured: one refusal each, then the nonce goes in the proofs.
func TestDPoPNonces(t *testing.T) {
	f := newFakeAS(t, func(f *fakeAS) {
		f.dpop.algs, f.dpop.challenge = []string{"ES256"}, true
		f.dpop.asNonce, f.dpop.rsNonce = "as-nonce-1", "rs-nonce-1"
	})
	s := newSource(t, f, nil)
	mustCall(t, s, f.mcpURL())
	mustCall(t, s, f.mcpURL())
	d := f.dpopState()
	assert.Empty(t, d.problems)
	assert.Equal(t, 1, d.asChallenges)
	assert.Len(t, d.tokenProofs, 1)
	assert.Equal(t, 1, d.rsChallenges, "the resource's nonce is remembered for the next request")
	assert.Equal(t, 2, d.served)
}

func TestDPoPModes(t *testing.T) {
	// Without a DPoP challenge, auto gets Bearer tokens even from a
	// server that supports DPoP.
	f := newFakeAS(t, func(f *fakeAS) { f.dpop.algs = []string{"ES256"} })
	mustCall(t, newSource(t, f, nil), f.mcpURL())
	assert.Empty(t, f.dpopState().tokenProofs)
	assert.Zero(t, f.dpopState().served)

	// always: DPoP whenever the server supports ES256 proofs.
	f = newFakeAS(t, func(f *fakeAS) { f.dpop.algs = []string{"RS256", "ES256"} })
	mustCall(t, newSource(t, f, func(c *Config) { c.DPoP = DPoPAlways }), f.mcpURL())
	assert.Len(t, f.dpopState().tokenProofs, 1)
	assert.Equal(t, 1, f.dpopState().served)

	// never: Bearer, whatever the resource says.
	f = newFakeAS(t, func(f *fakeAS) { f.dpop.algs, f.dpop.challenge = []string{"ES256"}, true })
	mustCall(t, newSource(t, f, func(c *Config) { c.DPoP = DPoPNever }), f.mcpURL())
	assert.Empty(t, f.dpopState().tokenProofs)

	// A resource that demands DPoP of a server without ES256 proofs.
	f = newFakeAS(t, func(f *fakeAS) { f.dpop.algs, f.dpop.challenge = []string{"RS256"}, true })
	_, err := call(t, newSource(t, f, nil), f.mcpURL())
	assert.ErrorIs(t, err, ErrDPoPUnsupported)

	_, err = NewSource(Config{ServerURL: f.mcpURL(), DPoP: "sometimes"})
	assert.Error(t, err)
}

func TestDPoPKeyIsNeverShown(t *testing.T) {
	k, err := newDPoPKey()
	require.NoError(t, err)
	tok := &Token{AccessToken: "at-secret", TokenType: "DPoP", DPoPKey: k.encoded, Expiry: time.Now()}
	out, err := json.Marshal(tok)
	require.NoError(t, err)
	for _, s := range []string{tok.String(), fmt.Sprintf("%#v", tok), string(out)} {
		assert.NotContains(t, s, k.encoded)
		assert.NotContains(t, s, "at-secret")
		assert.Contains(t, s, "dpop")
	}
	back, err := parseDPoPKey(k.encoded)
	require.NoError(t, err)
	assert.Equal(t, k.jwk, back.jwk)
	proof, err := back.proof("POST", "https://mcp.example/mcp?x=1#f", "tok", "n", time.Now())
	require.NoError(t, err)
	p, err := oauthtest.VerifyDPoPProof(proof, "POST", "https://mcp.example/mcp", "tok")
	require.NoError(t, err, "htu leaves out the query and fragment")
	assert.Equal(t, "n", p.Nonce)
	assert.Equal(t, oauthtest.JWKThumbprint(k.jwk["x"], k.jwk["y"]), p.JKT)
}

func TestParseResourceChallenge(t *testing.T) {
	b, ok := ParseResourceChallenge([]string{`DPoP algs="ES256 RS256", resource_metadata="https://r/prm"`})
	require.True(t, ok)
	assert.Equal(t, BearerChallenge{ResourceMetadata: "https://r/prm", DPoP: true, DPoPAlgs: []string{"ES256", "RS256"}}, b)

	// Both schemes: the DPoP one, completed from the Bearer one.
	b, ok = ParseResourceChallenge([]string{`Bearer error="insufficient_scope", scope="a b", resource_metadata="u"`, `DPoP algs="ES256"`})
	require.True(t, ok)
	assert.Equal(t, BearerChallenge{ResourceMetadata: "u", Scope: "a b", Error: "insufficient_scope", DPoP: true, DPoPAlgs: []string{"ES256"}}, b)

	b, ok = ParseResourceChallenge([]string{`DPoP error="use_dpop_nonce", error_description="nonce"`})
	require.True(t, ok)
	assert.Equal(t, "use_dpop_nonce", b.Error)

	b, ok = ParseResourceChallenge([]string{`Bearer scope="x"`})
	require.True(t, ok)
	assert.False(t, b.DPoP)
	_, ok = ParseResourceChallenge([]string{`Basic realm="x"`})
	assert.False(t, ok)
}
