package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/channels"
)

// Channel messages, their inboxes, filters (channels.FromServer) and the
// way a model should see them (channels.Render) are the channels
// package's; the Supervisor opens inboxes on its servers' messages.

// RequestPermission relays a tool-approval prompt to every ready channel
// server that declared claude/channel/permission, under a fresh
// five-letter short ID, and returns the prompt and the servers it went
// to. The first answer settles it: a channel's
// notifications/claude/channel/permission verdict, or the host's own
// AnswerPermission (its local dialog). It expires after
// Options.PermissionTimeout.
func (s *Supervisor) RequestPermission(ctx context.Context, req channels.PermissionRequest) (*channels.Pending, []string, error) {
	return s.requestPermission(ctx, req, 0)
}

// AnswerPermission settles a permission request by its short ID (as the
// user typed it). For a request a channel server sent
// (EventPermissionRequest), the verdict goes to that server as
// notifications/claude/channel/permission. Unknown IDs fail with
// ErrUnknownPermission, expired ones with ErrPermissionExpired, answered
// ones with ErrPermissionAnswered.
func (s *Supervisor) AnswerPermission(id string, allow bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.answerPermission(ctx, id, allow)
}
