package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/channels"
)

// DefaultChannelCapacity is how many messages of one server a channel
// inbox keeps when its capacity is not given.
const DefaultChannelCapacity = channels.DefaultCapacity

// ChannelsFrom takes the channel messages of one server.
func ChannelsFrom(server string) channels.Filter { return channels.FromServer(server) }

// RenderChannelMessage shows a channel message the way a model should see
// it: <channel source="SERVER" k="v">content</channel>, attributes and
// content escaped so that a server cannot close the tag or forge the
// source.
func RenderChannelMessage(m channels.Message) string { return channels.Render(m) }

// Errors of the permission relay.
var (
	ErrUnknownPermission  = actors.ErrUnknownPermission
	ErrPermissionExpired  = actors.ErrPermissionExpired
	ErrPermissionAnswered = actors.ErrPermissionAnswered
)

// SubscribeChannels opens an inbox of the channel messages servers push
// from now on. It is OpenChannelInbox with only the capacity set: at most
// capacity messages of each server (zero: 1,000).
func (s *Supervisor) SubscribeChannels(ctx context.Context, capacity int) *channels.Inbox {
	return s.sys.SubscribeChannels(ctx, capacity)
}

// ChannelInboxOptions configure an inbox of channel messages (see
// OpenChannelInbox). The zero value keeps every message, up to 1,000
// messages and 16 MiB of each server.
type ChannelInboxOptions struct {
	// Capacity bounds the messages kept per server; zero means 1,000.
	Capacity int
	// MaxBytes bounds the bytes (content, meta keys and values) kept per
	// server; zero means 16 MiB, negative no byte bound. The newest
	// message is always kept.
	MaxBytes int
	// Filter selects the messages the inbox keeps; nil keeps all.
	Filter channels.Filter
}

// OpenChannelInbox opens an inbox of the channel messages servers push
// from now on (those o.Filter takes). The inbox is a queue per server:
// a message waits in it until taken (Wait, WaitN, TryTake, TakeN: the
// oldest a filter takes first), and when a server's queue is full its
// oldest message is dropped and counted (Stats, ServerStats, and the
// Dropped field of that server's next message delivered), so a slow
// subscriber never holds up a server, and a chatty server never pushes
// out another's messages. Each inbox gets every message once; several
// goroutines may wait on one inbox, each message going to one of them.
// The inbox closes when ctx ends or the supervisor closes.
func (s *Supervisor) OpenChannelInbox(ctx context.Context, o ChannelInboxOptions) *channels.Inbox {
	return s.sys.OpenChannelInbox(ctx, channels.InboxOptions{Capacity: o.Capacity, MaxBytes: o.MaxBytes, Filter: o.Filter})
}

// RequestPermission relays a tool-approval prompt to every ready channel
// server that declared claude/channel/permission, under a fresh
// five-letter short ID, and returns the prompt and the servers it went
// to. The first answer settles it: a channel's
// notifications/claude/channel/permission verdict, or the host's own
// AnswerPermission (its local dialog). It expires after
// Options.PermissionTimeout.
func (s *Supervisor) RequestPermission(ctx context.Context, req channels.PermissionRequest) (*channels.Pending, []string, error) {
	return s.sys.RequestPermission(ctx, req, 0)
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
	return s.sys.AnswerPermission(ctx, id, allow)
}

// PendingPermissions returns the permission requests still waiting for an
// answer, oldest first.
func (s *Supervisor) PendingPermissions() []*channels.Pending { return s.sys.PendingPermissions() }
