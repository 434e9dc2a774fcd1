package authn

import (
	"errors"
	"testing"
)

// The JWT decoder never panics, and refuses what it cannot read with
// ErrMalformed or ErrAlgorithm; what it accepts has the three parts it
// was made of, and an algorithm of the accepted list.
func FuzzParseJWT(f *testing.F) {
	for _, s := range []string{
		"eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6ImsxIn0.eyJzdWIiOiJ4In0.c2ln",
		"eyJhbGciOiJub25lIn0.e30.",
		"eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
		"eyJhbGciOiJFUzI1NiIsImNyaXQiOlsiYiJdfQ.e30.c2ln",
		"a.b.c", "..", "", "eyJ9.e30.e30",
		"eyJhbGciOiJFZERTQSJ9.eyJhdWQiOlsiYSIsMV0sImV4cCI6MWUzMDB9.AA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		jt, err := parseJWT(token)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrAlgorithm) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if _, ok := algorithms[jt.header.Alg]; !ok {
			t.Fatalf("accepted alg %q", jt.header.Alg)
		}
		if len(jt.signingInput) >= len(token) || token[:len(jt.signingInput)] != string(jt.signingInput) {
			t.Fatalf("signing input is not the token's first two parts")
		}
		var c claims
		if strictJSON(jt.payload, &c.raw) == nil {
			// Reading claims of any shape must not panic either.
			_, _ = c.time("exp")
			_ = c.strs("aud", false)
			_ = c.strs("scope", true)
		}
	})
}
