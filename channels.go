package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/channels"
)

// ChannelMessage is a message a channel server pushed
// (notifications/claude/channel from a server declaring
// capabilities.experimental["claude/channel"]): its source server,
// content and sanitized meta attributes.
type ChannelMessage = actors.ChannelMessage

// ChannelInbox is one subscriber's bounded queue of channel messages
// (see SubscribeChannels). Wait takes the oldest message a filter
// accepts; Stats counts what was dropped.
type ChannelInbox = actors.ChannelInbox

// ChannelFilter selects the channel messages a Wait takes; nil takes any.
type ChannelFilter = channels.Filter

// ChannelsFrom takes the channel messages of one server.
func ChannelsFrom(server string) ChannelFilter { return channels.FromServer(server) }

// RenderChannelMessage shows a channel message the way a model should see
// it: <channel source="SERVER" k="v">content</channel>, attributes and
// content escaped so that a server cannot close the tag or forge the
// source.
func RenderChannelMessage(m ChannelMessage) string { return channels.Render(m) }

// PermissionRequest is a tool-approval prompt for the channel permission
// relay: ToolName, Description, InputPreview (RequestID is assigned).
type PermissionRequest = actors.PermissionRequest

// PermissionPrompt is a permission request waiting for its answer: ID is
// the five-letter short ID a user types; Wait blocks for the answer.
type PermissionPrompt = actors.PermissionPrompt

// PermissionAnswer is how a permission request was settled: Allow, and By
// (the channel server that answered, or "" for the host).
type PermissionAnswer = actors.PermissionAnswer

// Errors of the permission relay.
var (
	ErrUnknownPermission  = actors.ErrUnknownPermission
	ErrPermissionExpired  = actors.ErrPermissionExpired
	ErrPermissionAnswered = actors.ErrPermissionAnswered
)

// EventPermissionAnswered: a channel server's verdict settled a
// permission request the host relayed.
const EventPermissionAnswered = actors.EventPermissionAnswered

// SubscribeChannels opens an inbox of the channel messages servers push
// from now on. It holds at most capacity messages (zero: 1,000); when
// full, the oldest is dropped and counted, so a slow subscriber never
// holds up a server or another subscriber. Each subscriber gets every
// message once; several goroutines may Wait on one inbox, each message
// going to one of them. The inbox closes when ctx ends or the supervisor
// closes.
func (s *Supervisor) SubscribeChannels(ctx context.Context, capacity int) *ChannelInbox {
	return s.sys.SubscribeChannels(ctx, capacity)
}

// RequestPermission relays a tool-approval prompt to every ready channel
// server that declared claude/channel/permission, under a fresh
// five-letter short ID, and returns the prompt and the servers it went
// to. The first answer settles it: a channel's
// notifications/claude/channel/permission verdict, or the host's own
// AnswerPermission (its local dialog). It expires after
// Options.PermissionTimeout.
func (s *Supervisor) RequestPermission(ctx context.Context, req PermissionRequest) (*PermissionPrompt, []string, error) {
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
func (s *Supervisor) PendingPermissions() []*PermissionPrompt { return s.sys.PendingPermissions() }
