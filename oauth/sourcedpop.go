package oauth

import (
	"net/http"
	"slices"
	"sync"
)

// The DPoP side of a Source: which token requests carry a proof, and how
// a bound token goes on the resource's requests.

// dpopState is the part of a Source that holds its DPoP state: whether
// the resource asked for DPoP-bound tokens, the parsed proof keys, and
// the latest nonces of the authorization server (token endpoint) and of
// the resource. Its own mu guards asked and keys (taken after Source.mu,
// never before it); each nonceBox has its own lock. mode is set once by
// NewSource.
type dpopState struct {
	mode string // Config.DPoP

	mu sync.Mutex
	// asked is set once the resource asked for DPoP-bound tokens (a
	// DPoP challenge, or dpop_bound_access_tokens_required).
	asked bool
	keys  map[string]*dpopKey // parsed DPoP keys, by their encoding

	asNonce, rsNonce nonceBox
}

// ask records that the resource asked for DPoP-bound tokens.
func (d *dpopState) ask() {
	d.mu.Lock()
	d.asked = true
	d.mu.Unlock()
}

// forRequest returns the proof key of a token request to the
// authorization server md, for the resource of metadata prm (nil: none
// known): the key held's token is bound to (a refresh keeps the
// binding), else a new key when the request is to get a DPoP-bound token
// (Config.DPoP), else nil (a Bearer token). Called with Source.sem held.
func (d *dpopState) forRequest(held *Token, md *ServerMetadata, prm *ResourceMetadata) (*dpopKey, error) {
	if d.mode == DPoPNever {
		return nil, nil
	}
	if held.DPoP() {
		return d.keyFor(held.DPoPKey)
	}
	d.mu.Lock()
	want := d.asked
	d.mu.Unlock()
	if prm != nil && prm.DPoPBoundAccessTokensRequired {
		want = true
	}
	var algs []string
	if md != nil {
		algs = md.DPoPSigningAlgValuesSupported
	}
	switch {
	case d.mode == DPoPAlways && slices.Contains(algs, dpopAlg):
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
	d.mu.Lock()
	d.cacheKey(k)
	d.mu.Unlock()
	return k, nil
}

// keyFor returns the parsed key of an encoding, parsing it once.
func (d *dpopState) keyFor(encoded string) (*dpopKey, error) {
	d.mu.Lock()
	k := d.keys[encoded]
	d.mu.Unlock()
	if k != nil {
		return k, nil
	}
	k, err := parseDPoPKey(encoded)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.cacheKey(k)
	d.mu.Unlock()
	return k, nil
}

// cacheKey keeps k; at most a few keys (the current token's and the ones
// being obtained). Called with d.mu held.
func (d *dpopState) cacheKey(k *dpopKey) {
	if len(d.keys) >= 4 {
		clear(d.keys)
	}
	if d.keys == nil {
		d.keys = map[string]*dpopKey{}
	}
	d.keys[k.encoded] = k
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
	k, err := s.dpop.keyFor(t.DPoPKey)
	if err != nil {
		return err
	}
	proof, err := k.proof(req.Method, req.URL.String(), token, s.dpop.rsNonce.get(), s.now())
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
	s.dpop.rsNonce.set(resp.Header.Get(headerDPoPNonce))
}

// boundToken reports whether token is the source's DPoP-bound token.
func (s *Source) boundToken(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.entry.Token
	return token != "" && t != nil && t.AccessToken == token && t.DPoP()
}
