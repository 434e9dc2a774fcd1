package mcpvisor

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/asynkron/protoactor-go/actor"
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

// notification handles a notification from the server. list_changed is
// honoured even from servers that did not declare listChanged.
func (a *serverActor) notification(m serverNotification) {
	if m.gen != a.gen {
		return
	}
	if a.sess == nil {
		if a.cancelConnect != nil {
			a.holdEarly(m)
		}
		return
	}
	if kind, ok := listChangedKinds[m.method]; ok {
		a.relist(kind)
		return
	}
	if m.method == protocol.NotificationSubscriptionsAck {
		// A listen stream (re)opened: what changed before it was not
		// announced, so list again what it covers; unless the connect
		// listed after this acknowledgement (listen_first.go).
		if a.firstListen.skipsRelist(m.params) {
			a.firstListen = nil
			return
		}
		var ack protocol.SubscriptionsAcknowledgedParams
		if json.Unmarshal(m.params, &ack) == nil {
			if ack.Notifications.ToolsListChanged {
				a.relist(listTools)
			}
			if ack.Notifications.ResourcesListChanged {
				a.relist(listResources)
			}
			if ack.Notifications.PromptsListChanged {
				a.relist(listPrompts)
			}
		}
		return
	}
	if ev, ok := a.hostNotification(m.method, m.params); ok {
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

// maxEarly bounds the notifications kept while a connection is being
// installed (see serverActor.early).
const maxEarly = 4096

// holdEarly keeps a notification of the connection being opened until it
// is installed.
func (a *serverActor) holdEarly(m serverNotification) {
	if len(a.early) >= maxEarly {
		a.earlyDropped++
		return
	}
	a.early = append(a.early, m)
}

// replayEarly handles the notifications that arrived while the new
// connection was being installed, in their order.
func (a *serverActor) replayEarly() {
	early, dropped := a.early, a.earlyDropped
	a.early, a.earlyDropped = nil, 0
	if dropped > 0 {
		a.log.Warn().Int("dropped", dropped).Int("kept", len(early)).Msg("notifications sent before the connection was ready exceeded the buffer; the oldest were kept")
	}
	for _, m := range early {
		a.notification(m)
	}
}

// relist re-lists one kind, at most one request in flight per kind; a
// burst of notifications during a re-list costs one more re-list.
func (a *serverActor) relist(kind listKind) {
	if a.relisting[kind] {
		a.relistAgain[kind] = true
		return
	}
	a.relisting[kind] = true
	sess, gen, self, root := a.sess, a.gen, a.self, a.root
	timeout := a.connectTimeout()
	pinStore, name, cfg := a.opts.ToolPins.Store, a.h.name, a.cfg
	a.goroutines.start("server.relist", func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var ls lists
		var err, pinErr error
		switch kind {
		case listTools:
			if ls.tools, err = sess.Lists().Tools(ctx); err == nil {
				ls.pins, pinErr = checkPins(pinStore, name, cfg, ls.tools)
			}
		case listResources:
			if ls.resources, err = sess.Lists().Resources(ctx); err == nil {
				ls.templates, err = sess.Lists().ResourceTemplates(ctx)
			}
		case listPrompts:
			ls.prompts, err = sess.Lists().Prompts(ctx)
		}
		root.Send(self, relisted{gen: gen, kind: kind, lists: ls, err: err, pinErr: pinErr})
	})
}

func (a *serverActor) relisted(m relisted) {
	if m.gen != a.gen || a.sess == nil {
		return
	}
	a.relisting[m.kind] = false
	if m.err != nil {
		// Keep the previous list; try again after a backoff delay.
		a.listFailed(m.kind, m.err) // the session's error names the method
		a.publish()
	} else {
		before := a.lists
		switch m.kind {
		case listTools:
			a.lists.tools, a.lists.pins = m.lists.tools, m.lists.pins
			a.storeCache(m.lists.tools)
		case listResources:
			a.lists.resources, a.lists.templates = m.lists.resources, m.lists.templates
		case listPrompts:
			a.lists.prompts = m.lists.prompts
		}
		if m.kind == listTools {
			// Before the view: the reason a tool leaves the pool comes
			// before the pool's diff (see pinsFound).
			a.pinsFound(m.pinErr)
		}
		recovered := a.listSucceeded(m.kind)
		// A re-list that finds nothing new (after a listen stream opened,
		// or a spurious list_changed) changes nothing for subscribers.
		if !reflect.DeepEqual(before, a.lists) {
			a.publish()
		} else {
			a.lists = before
			if recovered {
				a.publish()
			}
		}
	}
	if a.relistAgain[m.kind] {
		a.relistAgain[m.kind] = false
		a.relist(m.kind)
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
