package session

import (
	"github.com/mcpvisor/mcpvisor/protocol"
)

// CacheHints returns the server's caching hints.
func (s *Session) CacheHints() protocol.CacheHints {
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
