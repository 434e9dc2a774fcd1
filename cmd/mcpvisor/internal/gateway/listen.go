package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// listener is one open subscriptions/listen request (2026-07-28): its
// notifications go on the request's own stream, tagged with the
// subscription id (the request's id).
type listener struct {
	subs     protocol.NotificationSubscriptions
	logLevel protocol.LoggingLevel
	id       json.RawMessage
	send     func([]byte)
	once     sync.Once
	done     chan struct{}
}

func (l *listener) stop() { l.once.Do(func() { close(l.done) }) }

func (l *listener) wants(method string) bool {
	switch method {
	case protocol.NotificationToolsListChanged:
		return l.subs.ToolsListChanged
	case protocol.NotificationPromptsListChanged:
		return l.subs.PromptsListChanged
	case protocol.NotificationResourcesListChanged:
		return l.subs.ResourcesListChanged
	}
	return false
}

func (l *listener) wantsResource(uri string) bool {
	return slices.Contains(l.subs.ResourceSubscriptions, uri)
}

// notify sends a notification tagged with the subscription id.
func (l *listener) notify(method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
	}
	meta := protocol.Meta{}
	if m, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(m, &meta)
	}
	meta[protocol.MetaSubscriptionID] = l.id
	obj["_meta"], _ = json.Marshal(meta)
	frame, err := notification(method, obj)
	if err == nil {
		l.send(frame)
	}
}

func (g *Gateway) listenersSnapshot() []*listener {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*listener, 0, len(g.listens))
	for l := range g.listens {
		out = append(out, l)
	}
	return out
}

// listen serves subscriptions/listen: acknowledge the supported subset,
// then carry the selected notifications until the client goes away (ctx)
// or the gateway closes, which ends it gracefully with an empty result.
func (g *Gateway) listen(ctx context.Context, s *session, m *protocol.Message, reqNotify func([]byte)) (any, *protocol.Error) {
	if reqNotify == nil {
		return nil, errorf(protocol.CodeInvalidRequest, "subscriptions/listen needs a stream")
	}
	var p protocol.SubscriptionsListenParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, errorf(protocol.CodeInvalidParams, "subscriptions/listen: %v", err)
	}
	id, _ := m.ID.MarshalJSON()
	s.mu.Lock()
	level := s.logLevel
	s.mu.Unlock()
	l := &listener{subs: p.Notifications, logLevel: level, id: id, send: reqNotify, done: make(chan struct{})}
	l.notify(protocol.NotificationSubscriptionsAck, protocol.SubscriptionsAcknowledgedParams{Notifications: p.Notifications})
	g.mu.Lock()
	g.listens[l] = struct{}{}
	g.mu.Unlock()
	var held []string
	for _, uri := range p.Notifications.ResourceSubscriptions {
		if g.acquireResource(ctx, l, uri) == nil {
			held = append(held, uri)
		}
	}
	defer func() {
		g.mu.Lock()
		delete(g.listens, l)
		g.mu.Unlock()
		g.releaseAll(l, held)
	}()
	select {
	case <-ctx.Done():
		return nil, rpcError(ctx.Err())
	case <-l.done:
		// A graceful end: the result names the subscription it ends.
		return struct {
			Meta       protocol.Meta `json:"_meta"`
			ResultType string        `json:"resultType"`
		}{protocol.Meta{protocol.MetaSubscriptionID: l.id}, protocol.ResultComplete}, nil
	}
}
