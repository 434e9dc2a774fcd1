package mcpvisor

// ServerState returns the state of the configured server name, read from
// its published view without a mailbox hop; an unknown name is an
// ErrUnknownServer. (Package cluster asks it before running a call
// that arrived from another member, so that a server still connecting
// answers "not ready" rather than "unknown tool".)
func (s *Supervisor) ServerState(name string) (State, error) {
	h, err := s.handle(name)
	if err != nil {
		return "", err
	}
	return h.view.Load().state, nil
}
