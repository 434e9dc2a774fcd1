package authn_test

import (
	"context"
	"crypto/subtle"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/gateway/authn"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
)

// BenchmarkValidate measures one token validation: the static token's
// constant-time comparison beside a JWT's full validation (parse, key
// lookup in the cached set, signature, claims) for each algorithm, the
// verified-token cache off; and a remembered token ("cached": a hash and
// a lookup).
func BenchmarkValidate(b *testing.B) {
	is := oauthtest.NewIssuer()
	defer is.Close()
	b.Run("static", func(b *testing.B) {
		want := []byte("a-static-token-of-32-characters!")
		got := []byte("a-static-token-of-32-characters!")
		b.ReportAllocs()
		for b.Loop() {
			if subtle.ConstantTimeCompare(got, want) != 1 {
				b.Fatal("mismatch")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		v, err := authn.New(authn.Options{Issuer: is.URL, Audience: "https://gw.example/mcp"})
		if err != nil {
			b.Fatal(err)
		}
		tok := is.Token("RS256", map[string]any{"iss": is.URL, "aud": "https://gw.example/mcp", "sub": "alice",
			"scope": "mcp:tools", "exp": time.Now().Add(time.Hour).Unix()})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.ValidateToken(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, alg := range []string{"RS256", "PS256", "ES256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			v, err := authn.New(authn.Options{Issuer: is.URL, Audience: "https://gw.example/mcp", VerifiedCache: -1})
			if err != nil {
				b.Fatal(err)
			}
			tok := is.Token(alg, map[string]any{"iss": is.URL, "aud": "https://gw.example/mcp", "sub": "alice",
				"client_id": "app", "scope": "mcp:tools", "groups": []string{"eng"},
				"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()})
			ctx := context.Background()
			if _, err := v.ValidateToken(ctx, tok); err != nil { // fetches the keys
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.ValidateToken(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
