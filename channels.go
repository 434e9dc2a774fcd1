package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/channels"
)

// Channels returns the servers' channels (Claude Code's channels
// extension): inboxes of their messages and the permission relay.
func (s *Supervisor) Channels() Channels { return Channels{s} }

// Channels is what a Supervisor offers of its servers' channels: a handle
// got from Supervisor.Channels, safe for concurrent use like the
// Supervisor.
type Channels struct{ s *Supervisor }

// Channel messages, their inboxes, filters (channels.FromServer) and the
// way a model should see them (channels.Render) are the channels
// package's; the Supervisor opens inboxes on its servers' messages.

// OpenInbox opens an inbox of the channel messages servers push
// from now on (those o.Filter takes). The zero options keep every message,
// up to channels.DefaultCapacity messages and channels.DefaultMaxBytes
// bytes of each server. The inbox is a queue per server:
// a message waits in it until taken (Wait, WaitN, TryTake, TakeN: the
// oldest a filter takes first), and when a server's queue is full its
// oldest message is dropped and counted (Stats, ServerStats, and the
// Dropped field of that server's next message delivered), so a slow
// subscriber never holds up a server, and a chatty server never pushes
// out another's messages. Each inbox gets every message once; several
// goroutines may wait on one inbox, each message going to one of them.
// The inbox closes when ctx ends or the supervisor closes.
func (ch Channels) OpenInbox(ctx context.Context, o channels.InboxOptions) *channels.Inbox {
	s := ch.s
	in := s.opts.host.hub.Open(o)
	select {
	case <-s.closed:
		in.Close()
	default:
		context.AfterFunc(ctx, in.Close)
	}
	return in
}

// RequestPermission relays a tool-approval prompt to every ready channel
// server that declared claude/channel/permission, under a fresh
// five-letter short ID, and returns the prompt and the servers it went
// to. The first answer settles it: a channel's
// notifications/claude/channel/permission verdict, or the host's own
// AnswerPermission (its local dialog). It expires after
// Options.PermissionTimeout.
func (ch Channels) RequestPermission(ctx context.Context, req channels.PermissionRequest) (*channels.Pending, []string, error) {
	return ch.requestPermission(ctx, req, 0)
}

// AnswerPermission settles a permission request by its short ID (as the
// user typed it). For a request a channel server sent
// (EventPermissionRequest), the verdict goes to that server as
// notifications/claude/channel/permission. Unknown IDs fail with
// ErrUnknownPermission, expired ones with ErrPermissionExpired, answered
// ones with ErrPermissionAnswered.
func (ch Channels) AnswerPermission(id string, allow bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ch.answerPermission(ctx, id, allow)
}

// PendingPermissions returns the permission requests still waiting for an
// answer, oldest first.
func (ch Channels) PendingPermissions() []*channels.Pending { return ch.s.opts.host.relay.Live() }
