package mcpvisor

// ServerInstructions returns the instructions server gave at initialize
// on its current connection: "" for an unknown server, one not ready, or
// one that gave none. A gateway indexes them and shows their first line
// as the server's purpose (gateway.InstructionsSource). Safe for
// concurrent use: it reads the server's published view.
func (s *Supervisor) ServerInstructions(server string) string {
	h, err := s.handle(server)
	if err != nil {
		return ""
	}
	v := h.view.Load()
	if v == nil || v.sess == nil {
		return ""
	}
	return v.sess.Peer().Instructions
}
