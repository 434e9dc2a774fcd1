package oauth

import (
	"net/http"
	"slices"
)

// The DPoP side of a Source: which token requests carry a proof, and how
// a bound token goes on the resource's requests.

// dpopFor returns the proof key of a token request: the key held's token
// is bound to (a refresh keeps the binding), else a new key when the
// request is to get a DPoP-bound token (Config.DPoP), else nil (a Bearer
// token). Called with sem held.
func (s *Source) dpopFor(held *Token) (*dpopKey, error) {
	if s.cfg.DPoP == DPoPNever {
		return nil, nil
	}
	if held.DPoP() {
		return s.keyFor(held.DPoPKey)
	}
	s.mu.Lock()
	md, prm, want := s.meta, s.prm, s.wantDPoP
	s.mu.Unlock()
	if prm != nil && prm.DPoPBoundAccessTokensRequired {
		want = true
	}
	var algs []string
	if md != nil {
		algs = md.DPoPSigningAlgValuesSupported
	}
	switch {
	case s.cfg.DPoP == DPoPAlways && slices.Contains(algs, dpopAlg):
	case want && len(algs) > 0 && !slices.Contains(algs, dpopAlg):
		return nil, ErrDPoPUnsupported
	case want:
		// The resource asked. An authorization server that lists no
		// algorithm is asked all the same: it may bind anyway, and a
		// Bearer token would be refused.
	default:
		return nil, nil
	}
	k, err := newDPoPKey()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cacheKey(k)
	s.mu.Unlock()
	return k, nil
}

// keyFor returns the parsed key of an encoding, parsing it once.
func (s *Source) keyFor(encoded string) (*dpopKey, error) {
	s.mu.Lock()
	k := s.dpopKeys[encoded]
	s.mu.Unlock()
	if k != nil {
		return k, nil
	}
	k, err := parseDPoPKey(encoded)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cacheKey(k)
	s.mu.Unlock()
	return k, nil
}

// cacheKey keeps k; at most a few keys (the current token's and the ones
// being obtained). Called with mu held.
func (s *Source) cacheKey(k *dpopKey) {
	if len(s.dpopKeys) >= 4 {
		clear(s.dpopKeys)
	}
	if s.dpopKeys == nil {
		s.dpopKeys = map[string]*dpopKey{}
	}
	s.dpopKeys[k.encoded] = k
}

// SetAuthorization puts token on req: "Authorization: Bearer <token>",
// or, when token is the source's DPoP-bound token, "Authorization: DPoP
// <token>" with a fresh proof for req's method and URL in the DPoP
// header, carrying the resource's latest nonce. req's header must be its
// own (the caller's clone).
func (s *Source) SetAuthorization(req *http.Request, token string) error {
	s.mu.Lock()
	t := s.entry.Token
	bound := t != nil && t.AccessToken == token && t.DPoP()
	s.mu.Unlock()
	if !bound {
		req.Header["Authorization"] = []string{"Bearer " + token}
		delete(req.Header, headerDPoP)
		return nil
	}
	k, err := s.keyFor(t.DPoPKey)
	if err != nil {
		return err
	}
	proof, err := k.proof(req.Method, req.URL.String(), token, s.rsNonce.get(), s.now())
	if err != nil {
		return err
	}
	req.Header["Authorization"] = []string{tokenTypeDPoP + " " + token}
	req.Header[headerDPoP] = []string{proof}
	return nil
}

// Observe takes what a response of the resource tells the source: a new
// DPoP nonce (RFC 9449 §9).
func (s *Source) Observe(resp *http.Response) {
	s.rsNonce.set(resp.Header.Get(headerDPoPNonce))
}

// boundToken reports whether token is the source's DPoP-bound token.
func (s *Source) boundToken(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.entry.Token
	return token != "" && t != nil && t.AccessToken == token && t.DPoP()
}
