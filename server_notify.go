package mcpvisor

import (
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// listKind names one of the lists a server offers.
type listKind int

const (
	listTools listKind = iota
	listResources
	listPrompts
	numListKinds
)

var listChangedKinds = map[string]listKind{
	protocol.NotificationToolsListChanged:     listTools,
	protocol.NotificationResourcesListChanged: listResources,
	protocol.NotificationPromptsListChanged:   listPrompts,
}

// notificationRouter has one job: routing the notifications of the
// server's live connection: list changes to the relister, the channel
// extension's to the host, the rest to the registry as events. Those of
// a connection being opened that arrive before it is installed (a server
// may push as soon as it answered tools/list, while the other lists are
// still on their way) are held, and routed once it is.
//
// Concurrency: owned by the server actor's goroutine, like the actor it
// is part of (a).
type notificationRouter struct {
	a *serverActor // the actor whose connection it hears

	early        []serverNotification // held until the connection is installed (see hold)
	earlyDropped int                  // notifications beyond maxEarly, dropped and logged
}

// route handles a notification from the server. list_changed is
// honoured even from servers that did not declare listChanged.
func (n *notificationRouter) route(m serverNotification) {
	a := n.a
	if m.gen != a.gen {
		return
	}
	if a.sess == nil {
		if a.cancelConnect != nil {
			n.hold(m)
		}
		return
	}
	if kind, ok := listChangedKinds[m.method]; ok {
		a.relister.relist(kind)
		return
	}
	if m.method == protocol.NotificationSubscriptionsAck {
		// A listen stream (re)opened: what changed before it was not
		// announced, so list again what it covers; unless the connect
		// listed after this acknowledgement (listen_first.go).
		if a.relister.firstListen.skipsRelist(m.params) {
			a.relister.firstListen = nil
			return
		}
		var ack protocol.SubscriptionsAcknowledgedParams
		if json.Unmarshal(m.params, &ack) == nil {
			if ack.Notifications.ToolsListChanged {
				a.relister.relist(listTools)
			}
			if ack.Notifications.ResourcesListChanged {
				a.relister.relist(listResources)
			}
			if ack.Notifications.PromptsListChanged {
				a.relister.relist(listPrompts)
			}
		}
		return
	}
	if ev, ok := n.hostNotification(m.method, m.params); ok {
		if ev.Type != "" && a.parent != nil {
			a.root.Send(a.parent, serverEvent{handle: a.h, event: ev})
		}
		return
	}
	if ev, ok := notificationEvent(m.method, m.params); ok {
		if a.parent != nil {
			a.root.Send(a.parent, serverEvent{handle: a.h, event: ev})
		}
		return
	}
	a.log.Debug().Str("method", m.method).Msg("notification")
}

// notificationEvent turns a notification a host hears about into its
// event (without Server, Seq and Time, which the registry sets).
func notificationEvent(method string, params json.RawMessage) (eventRecord, bool) {
	switch method {
	case protocol.NotificationResourceUpdated:
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(params, &p)
		return eventRecord{Type: EventResourceUpdated, URI: p.URI, Data: params}, true
	case protocol.NotificationMessage:
		var p struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(params, &p)
		return eventRecord{Type: EventLogMessage, Level: p.Level, Data: params}, true
	case protocol.NotificationProgress:
		return eventRecord{Type: EventProgress, Data: params}, true
	case protocol.NotificationChannel:
		return eventRecord{Type: EventChannelMessage, Data: params}, true
	case protocol.NotificationChannelPermissionRequest:
		return eventRecord{Type: EventPermissionRequest, Data: params}, true
	}
	return eventRecord{}, false
}

// hostNotification hands progress to the call waiting for it, and handles
// the channel extension's notifications from the server (in the server
// actor). It reports whether the method was fully handled here, and the
// event to publish, if any. Notifications from a server
// that did not declare the capability are dropped, as Claude Code drops
// them.
func (n *notificationRouter) hostNotification(method string, params json.RawMessage) (eventRecord, bool) {
	a := n.a
	host := a.opts.host
	if host == nil {
		return eventRecord{}, false
	}
	caps := a.sess.Peer().Capabilities
	switch method {
	case protocol.NotificationProgress:
		// Delivered to the call by genHandler already.
		return eventRecord{}, false // and an event, like any progress
	case protocol.NotificationTaskStatus:
		var task protocol.Task
		_ = json.Unmarshal(params, &task)
		return eventRecord{Type: EventTaskStatus, TaskID: task.TaskID, Data: params}, true
	case protocol.NotificationChannel:
		if !declares(caps, channels.CapabilityChannel) {
			a.log.Debug().Msg("dropping a channel message from a server that did not declare claude/channel")
			return eventRecord{}, true
		}
		msg, err := channels.Parse(a.h.name, params)
		if err != nil {
			a.log.Warn().Err(err).Msg("dropping a malformed channel message")
			return eventRecord{}, true
		}
		msg = host.hub.Publish(msg)
		return eventRecord{Type: EventChannelMessage, Data: params, ChannelSeq: msg.Seq}, true

	case protocol.NotificationChannelPermission:
		// A channel server's verdict on a prompt the host relayed to it.
		if !declares(caps, channels.CapabilityPermission) {
			a.log.Warn().Msg("dropping a permission verdict from a server that did not declare claude/channel/permission")
			return eventRecord{}, true
		}
		var v channels.PermissionVerdict
		if err := json.Unmarshal(params, &v); err != nil || (v.Behavior != channels.BehaviorAllow && v.Behavior != channels.BehaviorDeny) {
			a.log.Warn().Bytes("params", clipBytes(params, 200)).Msg("dropping a malformed permission verdict")
			return eventRecord{}, true
		}
		if p, ok := host.relay.Lookup(v.RequestID); !ok || p.Server != "" {
			a.log.Info().Str("request_id", v.RequestID).Msg("dropping a permission verdict for no pending request of the host (unknown, expired or already answered)")
			return eventRecord{}, true
		}
		p, err := host.relay.Answer(v.RequestID, v.Behavior == channels.BehaviorAllow, a.h.name)
		if err != nil {
			a.log.Info().Err(err).Msg("dropping a permission verdict")
			return eventRecord{}, true
		}
		return eventRecord{Type: EventPermissionAnswered, PermissionID: p.ID, Data: params}, true

	case protocol.NotificationChannelPermissionRequest:
		// A server asking the host for a verdict (the direction the
		// relay does not use in Claude Code, kept for servers that
		// gate their own actions): it gets a short ID the user answers
		// with AnswerPermission.
		if !declares(caps, channels.CapabilityChannel) && !declares(caps, channels.CapabilityPermission) {
			a.log.Debug().Msg("dropping a permission request from a server that is not a channel")
			return eventRecord{}, true
		}
		var req channels.PermissionRequest
		if err := json.Unmarshal(params, &req); err != nil {
			a.log.Warn().Err(err).Msg("dropping a malformed permission request")
			return eventRecord{}, true
		}
		p := host.relay.Open(a.h.name, req, 0)
		return eventRecord{Type: EventPermissionRequest, PermissionID: p.ID, Data: params}, true
	}
	return eventRecord{}, false
}

// maxEarly bounds the notifications kept while a connection is being
// installed (see notificationRouter.early).
const maxEarly = 4096

// hold keeps a notification of the connection being opened until it
// is installed.
func (n *notificationRouter) hold(m serverNotification) {
	if len(n.early) >= maxEarly {
		n.earlyDropped++
		return
	}
	n.early = append(n.early, m)
}

// forgetHeld drops the notifications held for a connection that will
// not be installed (a new attempt starts, or this one failed).
func (n *notificationRouter) forgetHeld() {
	n.early, n.earlyDropped = nil, 0
}

// replay handles the notifications that arrived while the new
// connection was being installed, in their order.
func (n *notificationRouter) replay() {
	a := n.a
	early, dropped := n.early, n.earlyDropped
	n.early, n.earlyDropped = nil, 0
	if dropped > 0 {
		a.log.Warn().Int("dropped", dropped).Int("kept", len(early)).Msg("notifications sent before the connection was ready exceeded the buffer; the oldest were kept")
	}
	for _, m := range early {
		n.route(m)
	}
}

// genHandler forwards one generation's notifications to the actor.
// Progress goes to the waiting call first, from the session's receive
// goroutine itself: through the actor's mailbox, the last report could
// arrive after the call's result, which the receive goroutine completes
// directly.
type genHandler struct {
	root     *actor.RootContext
	self     *actor.PID
	gen      uint64
	server   string
	progress *progressRoutes // nil without a host
}

func (h *genHandler) Notification(method string, params json.RawMessage) {
	if method == protocol.NotificationProgress && h.progress != nil {
		h.progress.deliver(h.server, params)
	}
	h.root.Send(h.self, serverNotification{gen: h.gen, method: method, params: params})
}

func (h *genHandler) Closed(err error) {
	h.root.Send(h.self, connectionLost{gen: h.gen, err: err})
}
