package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// subscriptions/listen (2026-07-28): a request that stays open and whose
// own stream carries the notifications its client selected, each tagged
// with _meta[io.modelcontextprotocol/subscriptionId] = the request's id.
// Its first message is notifications/subscriptions/acknowledged, naming
// what the server agreed to (Options.Subscriptions). It ends gracefully
// with a complete result (Shutdown, EndListens), or without an answer
// when its client cancels it or goes away, or its session closes.

// listener is one open subscriptions/listen request.
//
// Concurrency: the fields but mu are set before it is registered and
// never change; mu orders the acknowledgement before every notification;
// end runs once.
type listener struct {
	srv       *Server
	x         *exchange
	idJSON    []byte
	agreed    protocol.NotificationSubscriptions
	resources map[string]struct{}
	logLevel  protocol.LoggingLevel
	release   func()
	once      sync.Once
	mu        sync.Mutex // held while the acknowledgement is sent, and by each notify
}

// listenParams is the params of subscriptions/listen: the filter is its
// notifications member (a filter at the top level is taken too).
type listenParams struct {
	Notifications *protocol.NotificationSubscriptions `json:"notifications"`
	protocol.NotificationSubscriptions
}

// listen serves subscriptions/listen: the acknowledgement, then the
// agreed notifications until the stream ends (see above).
func (s *Server) listen(ctx context.Context, w ResponseWriter, r *Request) {
	if r.Meta == nil {
		w.Error(protocol.NewError(protocol.CodeMethodNotFound, "method not found: %s (protocol version %s and later)", r.Method, protocol.Version20260728))
		return
	}
	var p listenParams
	if err := json.Unmarshal(r.Params, &p); err != nil {
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "subscriptions/listen: %v", err))
		return
	}
	want := p.NotificationSubscriptions
	if p.Notifications != nil {
		want = *p.Notifications
	}
	// The filter's URIs are kept while the stream is open: counted in
	// the session's state (Options.MaxSessionState) before anything is
	// subscribed for them.
	sess := r.Session
	size := filterSize(want.ResourceSubscriptions)
	sess.mu.Lock()
	perr := sess.bytes.charge(sess.closed, r.Method, size)
	sess.mu.Unlock()
	if perr != nil {
		w.Error(perr)
		return
	}
	agreed, release := want, func() {}
	if s.opts.Subscriptions != nil {
		var rel func()
		agreed, rel = s.opts.Subscriptions(ctx, r, want)
		if rel != nil {
			release = rel
		}
	}
	if size > 0 {
		inner := release
		release = func() {
			inner()
			sess.mu.Lock()
			_ = sess.bytes.charge(sess.closed, r.Method, -size)
			sess.mu.Unlock()
		}
	}
	idJSON, _ := r.ID.MarshalJSON()
	l := &listener{srv: s, x: r.x, idJSON: idJSON, agreed: agreed, logLevel: r.Meta.LogLevel, release: release}
	for _, uri := range agreed.ResourceSubscriptions {
		if l.resources == nil {
			l.resources = map[string]struct{}{}
		}
		l.resources[uri] = struct{}{}
	}
	// The stream is registered before its acknowledgement is sent, under
	// its own lock, so that a notification sent once the client has the
	// acknowledgement reaches it, and none goes before it. It is
	// registered with its session first, then in the Server's table: a
	// fan-out that finds it in the table (see fanout.go) then finds the
	// session taking no notification of its own, and so sends none both
	// on the session and on the stream.
	l.mu.Lock()
	sess.mu.Lock()
	closed := sess.closed
	if !closed {
		if sess.listens == nil {
			sess.listens = map[protocol.ID]*listener{}
		}
		sess.listens[r.ID] = l
	}
	sess.mu.Unlock()
	shut := !s.table.addListener(l)
	acked := l.notifyLocked(protocol.NotificationSubscriptionsAck, protocol.SubscriptionsAcknowledgedParams{Notifications: agreed})
	l.mu.Unlock()
	switch {
	case !acked:
		l.once.Do(func() {
			l.unregister()
			l.release()
		})
		w.Error(protocol.NewError(protocol.CodeInvalidRequest, "subscriptions/listen needs a stream (over HTTP: Accept: text/event-stream)"))
	case shut:
		l.end(true)
	case closed:
		l.end(false)
	default:
		context.AfterFunc(ctx, func() { l.end(false) })
	}
}

// unregister removes the stream from its server's and session's tables.
func (l *listener) unregister() {
	t := &l.srv.table
	t.mu.Lock()
	delete(t.listens, l)
	t.mu.Unlock()
	sess := l.x.req.Session
	sess.mu.Lock()
	if sess.listens[l.x.req.ID] == l {
		delete(sess.listens, l.x.req.ID)
	}
	sess.mu.Unlock()
}

// end ends the listen stream: with its complete result when graceful,
// else without an answer. It releases what the stream held.
func (l *listener) end(graceful bool) {
	l.once.Do(func() {
		l.unregister()
		if graceful {
			res := make([]byte, 0, 96)
			res = append(res, `{"_meta":{"`+protocol.MetaSubscriptionID+`":`...)
			res = append(res, l.idJSON...)
			res = append(res, `},"resultType":"complete"}`...)
			l.x.Reply(protocol.ValidJSON(res))
		} else {
			l.x.abandon()
		}
		l.release()
	})
}

// notify sends a notification on the listen stream, tagged with its
// subscription id, once the acknowledgement is out.
func (l *listener) notify(method string, params any) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.notifyLocked(method, params)
}

func (l *listener) notifyLocked(method string, params any) bool {
	frame, err := taggedNotification(method, l.idJSON, params)
	if err != nil {
		l.srv.log.Debug().Err(err).Str("method", method).Msg("encoding a notification")
		return false
	}
	return l.x.out.notify(frame)
}

// wants reports whether the stream selected a list_changed method.
func (l *listener) wants(method string) bool {
	switch method {
	case protocol.NotificationToolsListChanged:
		return l.agreed.ToolsListChanged
	case protocol.NotificationPromptsListChanged:
		return l.agreed.PromptsListChanged
	case protocol.NotificationResourcesListChanged:
		return l.agreed.ResourcesListChanged
	}
	return false
}

// wantsResource reports whether the stream selected the updates of uri.
func (l *listener) wantsResource(uri string) bool {
	_, ok := l.resources[uri]
	return ok
}

// EndListens ends every subscriptions/listen stream with its complete
// result (a graceful end: the client may listen again).
func (s *Server) EndListens() {
	for _, l := range s.table.listeners() {
		l.end(true)
	}
}

// taggedNotification encodes a notification whose params carry
// _meta[subscriptionId] = idJSON besides their own members.
func taggedNotification(method string, idJSON []byte, params any) ([]byte, error) {
	var raw []byte
	switch p := params.(type) {
	case nil:
	case protocol.ValidJSON:
		raw = p
	case json.RawMessage:
		raw = p
	default:
		var err error
		if raw, err = json.Marshal(params); err != nil {
			return nil, err
		}
	}
	raw = bytes.TrimSpace(raw)
	tag := make([]byte, 0, len(raw)+len(idJSON)+64)
	tag = append(tag, `{"_meta":{"`+protocol.MetaSubscriptionID+`":`...)
	tag = append(tag, idJSON...)
	tag = append(tag, '}')
	switch {
	case len(raw) == 0 || string(raw) == "null" || isEmptyObject(raw):
		tag = append(tag, '}')
	case raw[0] != '{':
		return nil, &json.UnsupportedValueError{Str: "params that are not an object"}
	default:
		if _, found, ok := protocol.RawMember(raw, "_meta"); !ok || found {
			return mergedTag(method, idJSON, raw)
		}
		tag = append(append(tag, ','), bytes.TrimSpace(raw[1:])...)
	}
	return protocol.AppendRequest(nil, protocol.ID{}, method, protocol.ValidJSON(tag))
}

// mergedTag is taggedNotification for params that have a _meta of their
// own (or cannot be scanned): the tag joins their _meta.
func mergedTag(method string, idJSON []byte, raw []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	meta := protocol.Meta{}
	if m, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(m, &meta)
	}
	meta[protocol.MetaSubscriptionID] = slices.Clone(idJSON)
	obj["_meta"], _ = json.Marshal(meta)
	return protocol.AppendRequest(nil, protocol.ID{}, method, obj)
}
