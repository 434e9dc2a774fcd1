package mockserver

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// defaultCacheTTL is the ttlMs of Options.CacheTTL's zero value.
const defaultCacheTTL = time.Minute

// cacheHints returns the members a cacheable result of the stateless era
// gets (resultType, ttlMs, cacheScope), as JSON without braces.
func (s *server) cacheHints() string {
	ttl := s.o.CacheTTL
	if ttl == 0 {
		ttl = defaultCacheTTL
	}
	scope := s.o.CacheScope
	if scope != protocol.CacheScopePrivate {
		scope = protocol.CacheScopePublic
	}
	return `"resultType":"complete","ttlMs":` + strconv.FormatInt(max(ttl.Milliseconds(), 0), 10) + `,"cacheScope":"` + scope + `"`
}

// cacheable returns result for request m: with the caching hints when m
// is a request of the stateless era, as it is otherwise.
func (s *server) cacheable(m *protocol.Message, result any) any {
	if !s.modernVersion(m.Params) {
		return result
	}
	raw, err := json.Marshal(result)
	if err != nil || len(raw) < 2 || raw[0] != '{' {
		return result
	}
	out := make([]byte, 0, len(raw)+80)
	out = append(out, '{')
	out = append(out, s.cacheHints()...)
	if len(raw) > 2 {
		out = append(out, ',')
	}
	return protocol.ValidJSON(append(out, raw[1:]...))
}
