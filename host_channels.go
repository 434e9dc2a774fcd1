package mcpvisor

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// declares reports whether the session's server declared the experimental
// capability key.
func declares(caps protocol.ServerCapabilities, key string) bool {
	_, ok := caps.Experimental[key]
	return ok
}

func clipBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// SubscribeChannels opens an inbox that receives every channel message
// accepted from now on, holding at most capacity of each server's (zero
// means 1,000) and dropping that server's oldest, counted, when full. It
// closes when ctx ends or the supervisor closes.
func (s *Supervisor) subscribeChannels(ctx context.Context, capacity int) *channels.Inbox {
	return s.OpenChannelInbox(ctx, channels.InboxOptions{Capacity: capacity})
}

// OpenChannelInbox opens an inbox of the channel messages servers push
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
func (s *Supervisor) OpenChannelInbox(ctx context.Context, o channels.InboxOptions) *channels.Inbox {
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
// server that declared claude/channel/permission (not toggled off), as
// notifications/claude/channel/permission_request with a fresh short ID
// (req.RequestID is set to it). The prompt is settled by the first
// answer: a server's notifications/claude/channel/permission verdict, or
// the host's own AnswerPermission; it expires after
// Options.PermissionTimeout (ttl, when positive). It returns the prompt
// and the servers it was sent to (none is not an error: the host may
// still answer it itself).
func (s *Supervisor) requestPermission(ctx context.Context, req channels.PermissionRequest, ttl time.Duration) (*channels.Pending, []string, error) {
	select {
	case <-s.closed:
		return nil, nil, ErrClosed
	default:
	}
	p := s.opts.host.relay.Open("", req, ttl)
	off := s.pool.Load().off
	var sent []string
	for _, h := range *s.handles.Load() {
		v := h.view.Load()
		if v.state != StateReady || v.sess == nil || off.Has(h.name) || !declares(v.sess.Peer().Capabilities, channels.CapabilityPermission) {
			continue
		}
		if err := v.sess.Notify(ctx, protocol.NotificationChannelPermissionRequest, p.Request); err != nil {
			s.log.Warn().Err(err).Str("server", h.name).Msg("could not relay a permission request")
			continue
		}
		sent = append(sent, h.name)
	}
	return p, sent, nil
}

// AnswerPermission settles the permission request with short ID id (as
// typed: case and surrounding spaces do not matter). A request the host
// relayed to its channel servers is settled for whoever waits on it. A
// request a channel server sent is answered to that server with
// notifications/claude/channel/permission {request_id, behavior}. An ID
// never issued is ErrUnknownPermission; one whose time ran out,
// ErrPermissionExpired; one already answered, ErrPermissionAnswered.
func (s *Supervisor) answerPermission(ctx context.Context, id string, allow bool) error {
	p, err := s.opts.host.relay.Answer(id, allow, "")
	if err != nil {
		return err
	}
	if p.Server == "" {
		return nil
	}
	h, err := s.handle(p.Server)
	if err != nil {
		return err
	}
	v, err := ready(h)
	if err != nil {
		return fmt.Errorf("mcpvisor: answering permission request %s: %w", p.ID, err)
	}
	behavior := channels.BehaviorDeny
	if allow {
		behavior = channels.BehaviorAllow
	}
	return v.sess.Notify(ctx, protocol.NotificationChannelPermission, channels.PermissionVerdict{RequestID: p.Request.RequestID, Behavior: behavior})
}

// PendingPermissions returns the permission requests still waiting for an
// answer, oldest first.
func (s *Supervisor) PendingPermissions() []*channels.Pending { return s.opts.host.relay.Live() }

// Errors of the permission relay (channels' sentinels).
var (
	ErrUnknownPermission  = channels.ErrUnknownPermission
	ErrPermissionExpired  = channels.ErrPermissionExpired
	ErrPermissionAnswered = channels.ErrPermissionAnswered
)
