package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Roots returns the roots the host offers its servers (MCP roots/list).
func (s *Supervisor) Roots() Roots { return Roots{s} }

// Roots is the host's roots, as its servers see them: a handle got from
// Supervisor.Roots, safe for concurrent use like the Supervisor.
type Roots struct{ s *Supervisor }

// List returns the roots the host exposes.
func (rt Roots) List() []protocol.Root { return rt.s.opts.host.roots.get() }

// Set replaces the roots answered to roots/list and sends
// notifications/roots/list_changed to every ready server of a handshake
// era; it returns the servers told.
func (rt Roots) Set(ctx context.Context, roots []protocol.Root) ([]string, error) {
	s := rt.s
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	if s.opts.Roots == nil {
		return nil, ErrRootsNotDeclared
	}
	host := s.opts.host
	host.roots.mu.Lock()
	host.roots.roots = append([]protocol.Root{}, roots...)
	host.roots.mu.Unlock()
	var told []string
	for _, h := range *s.handles.Load() {
		v := h.view.Load()
		if v.state != StateReady || v.sess == nil || protocol.UsesDiscover(v.sess.Peer().Version) {
			continue
		}
		if err := v.sess.Notify(ctx, protocol.NotificationRootsListChanged, nil); err != nil {
			s.log.Debug().Err(err).Str("server", h.name).Msg("could not send roots/list_changed")
			continue
		}
		told = append(told, h.name)
	}
	return told, nil
}
