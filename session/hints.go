package session

import (
	"github.com/mcpvisor/mcpvisor/protocol"
)

// CacheHints are what a 2026-07-28 server said about caching its
// server/discover result and its lists (SEP-2549), each from the latest
// complete listing on this connection: a list of several pages gets the
// strictest hint of its pages. A server of a handshake era says nothing,
// which the zero values mean: immediately stale, private.
type CacheHints struct {
	Discover  protocol.CacheHint `json:"discover"`
	Tools     protocol.CacheHint `json:"tools"`
	Prompts   protocol.CacheHint `json:"prompts"`
	Resources protocol.CacheHint `json:"resources"`
	Templates protocol.CacheHint `json:"templates"`
}

// CacheHints returns the server's caching hints.
func (s *Session) CacheHints() CacheHints {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hints
}

// setHint records the hint of a complete listing of method.
func (s *Session) setHint(method string, h protocol.CacheHint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case protocol.MethodToolsList:
		s.hints.Tools = h
	case protocol.MethodPromptsList:
		s.hints.Prompts = h
	case protocol.MethodResourcesList:
		s.hints.Resources = h
	case protocol.MethodResourcesTemplatesList:
		s.hints.Templates = h
	case protocol.MethodDiscover:
		s.hints.Discover = h
	}
}
