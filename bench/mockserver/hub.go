package mockserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// sink receives server-initiated notifications for one connection, session
// stream or subscription. notify is safe for concurrent use and may be
// called once more after the sink was removed from the hub; it owns frame.
type sink interface {
	notify(frame []byte)
}

// hub fans server-initiated notifications out to everyone who takes them:
// connections and sessions that get them unsolicited (stdio, WebSocket,
// legacy SSE sessions, Streamable HTTP GET streams), and
// subscriptions/listen streams (2026-07-28), which get only the kinds they
// asked for, tagged with their subscription id. A connection with a
// subscription gets notifications only through it.
//
// The mutex guards the two sets; notify is called outside it.
type hub struct {
	mu    sync.Mutex
	plain map[sink]struct{}
	subs  map[*subscription]struct{}
}

// subscription is one open subscriptions/listen request.
type subscription struct {
	id        protocol.ID     // the listen request's id, echoed as the subscription id
	tools     bool            // toolsListChanged agreed
	prompts   bool            // promptsListChanged agreed
	resources map[string]bool // resourceSubscriptions agreed
	out       sink
}

func newSubscription(id protocol.ID, agreed listenFilter, out sink) *subscription {
	sub := &subscription{id: id, tools: agreed.ToolsListChanged, prompts: agreed.PromptsListChanged, out: out}
	for _, u := range agreed.ResourceSubscriptions {
		if sub.resources == nil {
			sub.resources = map[string]bool{}
		}
		sub.resources[u] = true
	}
	return sub
}

func (h *hub) add(k sink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.plain == nil {
		h.plain = make(map[sink]struct{})
	}
	h.plain[k] = struct{}{}
}

// remove forgets k and every subscription delivering to it.
func (h *hub) remove(k sink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.plain, k)
	for sub := range h.subs {
		if sub.out == k {
			delete(h.subs, sub)
		}
	}
}

// subscribe registers sub; when conn is not nil (a connection transport),
// conn stops getting untagged notifications.
func (h *hub) subscribe(sub *subscription, conn sink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[*subscription]struct{})
	}
	h.subs[sub] = struct{}{}
	if conn != nil {
		delete(h.plain, conn)
	}
}

func (h *hub) unsubscribe(sub *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

// cancel ends the subscription with id on conn (a connection transport's
// client sent notifications/cancelled naming its listen request); it
// reports whether there was one.
func (h *hub) cancel(conn sink, id protocol.ID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.out == conn && sub.id == id {
			delete(h.subs, sub)
			return true
		}
	}
	return false
}

// resourceUpdated sends notifications/resources/updated for uri: to the
// connections and sessions that get notifications unsolicited when plain
// (the handshake eras' resources/subscribe covers uri), and to every
// listen stream whose resourceSubscriptions were agreed for uri, tagged.
// It reports whether anyone was sent it.
func (h *hub) resourceUpdated(uri string, plain bool) bool {
	params, _ := json.Marshal(protocol.ResourceUpdatedParams{URI: uri})
	h.mu.Lock()
	var sinks []sink
	if plain {
		sinks = make([]sink, 0, len(h.plain))
		for k := range h.plain {
			sinks = append(sinks, k)
		}
	}
	var subs []*subscription
	for sub := range h.subs {
		if sub.resources[uri] {
			subs = append(subs, sub)
		}
	}
	h.mu.Unlock()
	h.send(sinks, protocol.NotificationResourceUpdated, params)
	members := string(params[1 : len(params)-1])
	for _, sub := range subs {
		sub.out.notify(subscriptionMessage(protocol.NotificationResourceUpdated, sub.id, members))
	}
	return plain || len(subs) > 0
}

// toolsChanged sends notifications/tools/list_changed to everyone who
// takes it.
func (h *hub) toolsChanged() {
	h.listChanged(protocol.NotificationToolsListChanged, func(sub *subscription) bool { return sub.tools })
}

// promptsChanged sends notifications/prompts/list_changed to everyone who
// takes it.
func (h *hub) promptsChanged() {
	h.listChanged(protocol.NotificationPromptsListChanged, func(sub *subscription) bool { return sub.prompts })
}

// listChanged sends a list_changed notification to the connections that
// take notifications unsolicited and the listen streams that agreed to it.
func (h *hub) listChanged(method string, agreed func(*subscription) bool) {
	h.mu.Lock()
	var subs []*subscription
	for sub := range h.subs {
		if agreed(sub) {
			subs = append(subs, sub)
		}
	}
	plain := make([]sink, 0, len(h.plain))
	for k := range h.plain {
		plain = append(plain, k)
	}
	h.mu.Unlock()
	h.send(plain, method, nil)
	for _, sub := range subs {
		sub.out.notify(subscriptionMessage(method, sub.id, ""))
	}
}

// broadcast sends a notification to everyone: connections and sessions
// that get notifications unsolicited, and every subscriptions/listen
// stream (tagged with its subscription id) whatever it asked for.
func (h *hub) broadcast(method string, params json.RawMessage) {
	h.mu.Lock()
	plain := make([]sink, 0, len(h.plain))
	for k := range h.plain {
		plain = append(plain, k)
	}
	subs := make([]*subscription, 0, len(h.subs))
	for sub := range h.subs {
		subs = append(subs, sub)
	}
	h.mu.Unlock()
	h.send(plain, method, params)
	var members string // params' members, for the tagged copies
	if t := bytes.TrimSpace(params); len(t) > 2 && t[0] == '{' {
		members = string(bytes.TrimSpace(t[1 : len(t)-1]))
	}
	for _, sub := range subs {
		sub.out.notify(subscriptionMessage(method, sub.id, members))
	}
}

// send sends a notification to each of plain.
func (h *hub) send(plain []sink, method string, params json.RawMessage) {
	if len(plain) == 0 {
		return
	}
	var p any
	if len(params) > 0 {
		p = params
	}
	frame, _ := protocol.AppendRequest(nil, protocol.ID{}, method, p)
	for _, k := range plain[1:] {
		k.notify(slices.Clone(frame)) // each sink owns its frame
	}
	plain[0].notify(frame)
}

// listenFilter is the notification filter of subscriptions/listen, and of
// its acknowledgement (the agreed subset).
//
// TODO: move to protocol (SubscriptionFilter, SubscriptionsListenParams).
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listenParams is the params of subscriptions/listen: the filter is the
// notifications member. A filter at the top level is accepted too.
type listenParams struct {
	Notifications *listenFilter `json:"notifications"`
	listenFilter
}

// agreedFilter returns the subset of the requested filter the server
// honours: its tools change (and with the conformance fixtures, its
// prompts), and with Subscribe it sends resources/updated
// for its own resources (mock://…; other URIs are refused, left out of
// the acknowledgement); the conformance fixtures agree to every URI.
func (s *server) agreedFilter(params json.RawMessage) listenFilter {
	var p listenParams
	_ = json.Unmarshal(params, &p)
	f := p.listenFilter
	if p.Notifications != nil {
		f = *p.Notifications
	}
	agreed := listenFilter{ToolsListChanged: f.ToolsListChanged, PromptsListChanged: s.o.Conformance && f.PromptsListChanged}
	for _, u := range f.ResourceSubscriptions {
		if s.o.Conformance || (s.o.Subscribe && strings.HasPrefix(u, "mock://")) {
			agreed.ResourceSubscriptions = append(agreed.ResourceSubscriptions, u)
		}
	}
	return agreed
}

// subscriptionMessage returns a notification tagged with subscription id;
// extra, when not empty, is more members of params (JSON, without braces).
func subscriptionMessage(method string, id protocol.ID, extra string) []byte {
	idJSON, _ := id.MarshalJSON()
	params := `{"_meta":{"` + protocol.MetaSubscriptionID + `":` + string(idJSON) + `}`
	if extra != "" {
		params += "," + extra
	}
	frame, _ := protocol.AppendRequest(nil, protocol.ID{}, method, protocol.ValidJSON(params+"}"))
	return frame
}

// listenAck returns the first message of a subscriptions/listen stream.
func listenAck(id protocol.ID, agreed listenFilter) []byte {
	f, _ := json.Marshal(agreed)
	return subscriptionMessage(protocol.NotificationSubscriptionsAck, id, `"notifications":`+string(f))
}

// listenComplete returns the response that ends a subscriptions/listen
// stream gracefully.
func listenComplete(id protocol.ID) []byte {
	idJSON, _ := id.MarshalJSON()
	frame, _ := protocol.AppendResult(nil, id, protocol.ValidJSON(
		`{"resultType":"complete","_meta":{"`+protocol.MetaSubscriptionID+`":`+string(idJSON)+`}}`))
	return frame
}

// listen opens a subscription on a connection transport: the
// acknowledgement and the notifications go to conn, and the request stays
// unanswered for the connection's life.
func (s *server) listen(m *protocol.Message, conn sink) {
	agreed := s.agreedFilter(m.Params)
	sub := newSubscription(m.ID, agreed, conn)
	conn.notify(listenAck(m.ID, agreed))
	s.hub.subscribe(sub, conn)
}
