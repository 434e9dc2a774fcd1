package authn

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/gateway"
)

// introspect asks the issuer's introspection endpoint about an opaque
// token (RFC 7662), with the gateway's client credentials, and checks
// the answer as it checks a JWT's claims. Active answers are cached.
func (v *Validator) introspect(ctx context.Context, token string) (gateway.Identity, error) {
	if len(token) > MaxTokenSize {
		return gateway.Identity{}, refuse(ErrMalformed, "token too long")
	}
	key := sha256.Sum256([]byte(token))
	now := v.now()
	if id, ok := v.cache.get(key, now); ok {
		return id, nil
	}
	endpoint := v.opts.IntrospectionURL
	if endpoint == "" {
		v.fetchMu.Lock()
		md, err := v.metadata(ctx)
		v.fetchMu.Unlock()
		if err != nil {
			return gateway.Identity{}, refuse(ErrUnavailable, err.Error())
		}
		if endpoint = md.IntrospectionEndpoint; endpoint == "" {
			return gateway.Identity{}, refuse(ErrUnavailable, "the issuer's metadata has no introspection_endpoint")
		}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return gateway.Identity{}, refuse(ErrUnavailable, "bad introspection URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(v.opts.ClientID), url.QueryEscape(v.opts.ClientSecret))
	resp, err := v.client.Do(req)
	if err != nil {
		return gateway.Identity{}, refuse(ErrUnavailable, "introspection: "+redactURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		return gateway.Identity{}, refuse(ErrUnavailable, fmt.Sprintf("introspection: HTTP %d", resp.StatusCode))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil || len(b) > maxDocument {
		return gateway.Identity{}, refuse(ErrUnavailable, "introspection: answer unreadable or too long")
	}
	var c claims
	if err := strictJSON(b, &c.raw); err != nil {
		return gateway.Identity{}, refuse(ErrUnavailable, "introspection: answer is not a JSON object")
	}
	if active, _ := c.raw["active"].(bool); !active {
		return gateway.Identity{}, refuse(ErrInactive, "")
	}
	if tt := c.str("token_type"); tt != "" && !strings.EqualFold(tt, "Bearer") {
		// A DPoP-bound token needs its proof, which a bearer request
		// does not carry.
		return gateway.Identity{}, refuse(ErrInactive, "token type "+quoteShort(tt)+" is not Bearer")
	}
	if err := v.checkClaims(c, false); err != nil {
		return gateway.Identity{}, err
	}
	id := v.identity(c)
	if v.opts.IntrospectionCache > 0 {
		until := now.Add(v.opts.IntrospectionCache)
		if exp, _ := c.time("exp"); exp.Before(until) {
			until = exp
		}
		v.cache.put(key, id, until)
	}
	return id, nil
}

// redactURLError keeps an HTTP client error's cause without its URL's
// query (a form body is never in it; the URL is configuration).
func redactURLError(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// tokenCache keeps the identities of accepted tokens by the token's
// SHA-256 (never the token), each until its deadline, at most size of
// them (the least recently used goes first).
//
// Concurrency: safe for concurrent use; mu guards every field.
type tokenCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cached, most recent first; guarded by mu
	byKey map[[32]byte]*list.Element
}

type cached struct {
	key   [32]byte
	id    gateway.Identity
	until time.Time
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{size: size, order: list.New(), byKey: map[[32]byte]*list.Element{}}
}

func (c *tokenCache) get(key [32]byte, now time.Time) (gateway.Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return gateway.Identity{}, false
	}
	ent := e.Value.(*cached)
	if !now.Before(ent.until) {
		c.order.Remove(e)
		delete(c.byKey, key)
		return gateway.Identity{}, false
	}
	c.order.MoveToFront(e)
	return ent.id, true
}

func (c *tokenCache) put(key [32]byte, id gateway.Identity, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		e.Value = &cached{key: key, id: id, until: until}
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&cached{key: key, id: id, until: until})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cached).key)
	}
}
