package protocol

// Caching hints (SEP-2549, 2026-07-28): server/discover, the list results
// and resources/read carry ttlMs, how long the result may be considered
// fresh, and cacheScope, who may share a cached copy.

// The cacheScope values.
const (
	// CacheScopePublic: the result holds no user-specific data; any
	// client or shared cache may serve it to anyone.
	CacheScopePublic = "public"
	// CacheScopePrivate: the result may be reused only within the same
	// authorization context.
	CacheScopePrivate = "private"
)

// CacheHint is what a result said about caching it. The zero value is
// what a result without hints means: immediately stale (ttlMs 0), and, to
// be safe, private.
type CacheHint struct {
	// TTLMs is how long, in milliseconds, the result may be considered
	// fresh (never negative).
	TTLMs int64 `json:"ttlMs"`
	// Public is set when the server said cacheScope "public".
	Public bool `json:"public"`
}

// HintOf reads the hints of a result: a missing or negative ttlMs is 0, a
// cacheScope other than "public" is private.
func HintOf(ttlMs *int64, scope string) CacheHint {
	h := CacheHint{Public: scope == CacheScopePublic}
	if ttlMs != nil && *ttlMs > 0 {
		h.TTLMs = *ttlMs
	}
	return h
}

// Stricter returns the hint that allows no more than both: the shorter
// lifetime, and public only when both are.
func (h CacheHint) Stricter(o CacheHint) CacheHint {
	return CacheHint{TTLMs: min(h.TTLMs, o.TTLMs), Public: h.Public && o.Public}
}

// Scope returns the cacheScope member value of h.
func (h CacheHint) Scope() string {
	if h.Public {
		return CacheScopePublic
	}
	return CacheScopePrivate
}

// CacheHints are what a 2026-07-28 server said about caching its
// server/discover result and its lists (SEP-2549), each from the latest
// complete listing on one connection: a list of several pages gets the
// strictest hint of its pages. A server of a handshake era says nothing,
// which the zero values mean: immediately stale, private.
type CacheHints struct {
	Discover  CacheHint `json:"discover"`
	Tools     CacheHint `json:"tools"`
	Prompts   CacheHint `json:"prompts"`
	Resources CacheHint `json:"resources"`
	Templates CacheHint `json:"templates"`
}
