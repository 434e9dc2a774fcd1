package mcpvisor

import (
	"context"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Listening before listing (2026-07-28). A stateless-era server announces
// list changes only on a subscriptions/listen stream, so what changed
// before the stream's acknowledgement was never announced: lists taken
// before it must be taken again at the acknowledgement. The connect
// therefore opens the stream first and lists once the server has
// acknowledged it: the list requests are sent after the acknowledgement
// arrived, so the server answers them after it registered the stream, and
// any change after that is announced on the stream. The connect's lists
// are then current, and the first acknowledgement needs no re-list (it
// cost three list requests per connect). A server that does not
// acknowledge within listenAckWait is listed anyway, and re-listed at its
// acknowledgement as before.

// listenAckWait bounds how long a connect waits for the listen stream's
// acknowledgement before it lists without it. The spec makes the
// acknowledgement the stream's first message, so a server that keeps to
// it answers at once.
const listenAckWait = 2 * time.Second

// listenSubscriptions is what the listen stream of sess selects: the
// list_changed notifications the server declared. Empty in the handshake
// eras, which have no listen stream.
func listenSubscriptions(sess *session.Session) protocol.NotificationSubscriptions {
	if !protocol.UsesDiscover(sess.Peer().Version) {
		return protocol.NotificationSubscriptions{}
	}
	caps := sess.Peer().Capabilities
	return protocol.NotificationSubscriptions{
		ToolsListChanged:     caps.Tools != nil && caps.Tools.ListChanged,
		PromptsListChanged:   caps.Prompts != nil && caps.Prompts.ListChanged,
		ResourcesListChanged: caps.Resources != nil && caps.Resources.ListChanged,
	}
}

// firstListen is the listen stream a connect opened before listing.
type firstListen struct {
	stream *session.ListenStream
	opened time.Time
	// listedAfterAck: the connect's lists were requested after the
	// stream's acknowledgement, which then needs no re-list.
	listedAfterAck bool
}

// openListenFirst opens sess's listen stream and waits, within ctx and
// listenAckWait, for its acknowledgement or its end (a server without
// subscriptions/listen refuses it at once). It returns nil when there is
// nothing to listen to or the stream could not be opened; the actor's
// listen loop takes over the stream it returns (see startListening).
func openListenFirst(ctx context.Context, sess *session.Session) *firstListen {
	subs := listenSubscriptions(sess)
	if subs.IsEmpty() {
		return nil
	}
	// The stream lives as long as the session, not the connect: it ends
	// with the session, or when the listen loop cancels it.
	opened := time.Now()
	stream, err := sess.Subscriptions().Open(context.WithoutCancel(ctx), subs, nil)
	if err != nil {
		return nil
	}
	t := time.NewTimer(listenAckWait)
	defer t.Stop()
	select {
	case <-stream.Acknowledged():
		return &firstListen{stream: stream, opened: opened, listedAfterAck: true}
	case <-stream.Done():
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-stream.Acknowledged(): // acknowledged, then ended: listed after it all the same
		return &firstListen{stream: stream, opened: opened, listedAfterAck: true}
	default:
		return &firstListen{stream: stream, opened: opened}
	}
}

// skipsRelist reports whether the acknowledgement with params is the
// first stream's, whose connect listed after it.
func (f *firstListen) skipsRelist(params []byte) bool {
	if f == nil || !f.listedAfterAck {
		return false
	}
	var ack protocol.SubscriptionsAcknowledgedParams
	var id protocol.ID
	if protocol.Unmarshal(params, &ack) != nil || !ack.Meta.Get(protocol.MetaSubscriptionID, &id) {
		return false
	}
	return id == f.stream.ID()
}
