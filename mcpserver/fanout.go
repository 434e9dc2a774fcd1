package mcpserver

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The notifications that belong to no request go to every session that
// takes them (a handshake-era session once initialized: a connection, or
// an HTTP session's standalone stream) and to the subscriptions/listen
// streams that selected them, tagged with their subscription id. Each
// method returns how many sessions and streams it sent to.
//
// Each takes the listen streams before it looks at the sessions: a
// session with a listen stream takes no notification of its own, so a
// stream that opens in between must not be counted twice. Taken in this
// order, a stream registered meanwhile (before its acknowledgement, which
// promises only what follows it) misses the notification, and none is
// sent both on a session and on its new stream; the other order sent one
// to a stdio session and again on the listen stream it opened meanwhile.
// For this, a stream is registered with its session before it is in the
// Server's table (listen.go): one found in the table has its session
// taking no notification of its own already.

// Broadcast sends a notification to every session that takes
// notifications and to every listen stream, whatever it selected.
func (s *Server) Broadcast(method string, params any) int {
	listens := s.table.listeners()
	n := s.NotifySessions(method, params, nil)
	for _, l := range listens {
		if l.notify(method, params) {
			n++
		}
	}
	return n
}

// NotifySessions sends a notification to the sessions that take
// notifications and that want accepts (nil: every one). Listen streams
// get none.
func (s *Server) NotifySessions(method string, params any, want func(*Session) bool) int {
	var frame []byte
	n := 0
	for _, sess := range s.Sessions() {
		if !sess.takesNotifications() || (want != nil && !want(sess)) {
			continue
		}
		if frame == nil {
			var err error
			if frame, err = notification(method, params); err != nil {
				s.log.Debug().Err(err).Str("method", method).Msg("encoding a notification")
				return 0
			}
		}
		if sess.send(frame) {
			n++
		}
	}
	return n
}

// Audience narrows the recipients of a notification (the To forms of
// ListChanged, ResourceUpdated and Log): it is asked about each session
// that would get it (listen nil) and each listen stream that would
// (sess its session, listen the context of its subscriptions/listen
// request, which carries what the transport put there: e.g. the
// caller's identity). Nil accepts every one. It is called on the
// sender's goroutine and must not block.
type Audience func(sess *Session, listen context.Context) bool

// sessions returns the session filter of a: want (may be nil) and a.
func (a Audience) sessions(want func(*Session) bool) func(*Session) bool {
	if a == nil {
		return want
	}
	return func(sess *Session) bool { return (want == nil || want(sess)) && a(sess, nil) }
}

// listen reports whether a accepts listen stream l.
func (a Audience) listen(l *listener) bool {
	return a == nil || a(l.x.req.Session, l.x.ctx)
}

// ListChanged sends a list_changed notification (method is
// notifications/tools/list_changed, …/prompts/list_changed or
// …/resources/list_changed) to the sessions that take notifications and
// the listen streams that selected it.
func (s *Server) ListChanged(method string) int { return s.ListChangedTo(method, nil) }

// ListChangedTo is ListChanged to the recipients a accepts.
func (s *Server) ListChangedTo(method string, a Audience) int {
	listens := s.table.listeners()
	n := s.NotifySessions(method, nil, a.sessions(nil))
	for _, l := range listens {
		if l.wants(method) && a.listen(l) && l.notify(method, nil) {
			n++
		}
	}
	return n
}

// ResourceUpdated sends notifications/resources/updated for uri to the
// sessions subscribed to it (Session.Subscribe) and the listen streams
// that selected it.
func (s *Server) ResourceUpdated(uri string) int { return s.ResourceUpdatedTo(uri, nil) }

// ResourceUpdatedTo is ResourceUpdated to the recipients a accepts.
func (s *Server) ResourceUpdatedTo(uri string, a Audience) int {
	params := protocol.ResourceUpdatedParams{URI: uri}
	listens := s.table.listeners()
	n := s.NotifySessions(protocol.NotificationResourceUpdated, params, a.sessions(func(sess *Session) bool { return sess.Subscribed(uri) }))
	for _, l := range listens {
		if l.wantsResource(uri) && a.listen(l) && l.notify(protocol.NotificationResourceUpdated, params) {
			n++
		}
	}
	return n
}

// DefaultLogLevel is the level of a session that never set one.
const DefaultLogLevel = protocol.LevelInfo

// Log sends notifications/message to the sessions whose level (set with
// logging/setLevel, else DefaultLogLevel) p.Level reaches, and to the
// listen streams whose request's _meta named a level it reaches (a
// stateless-era client that names none gets no log messages).
func (s *Server) Log(p protocol.LoggingMessageParams) int { return s.LogTo(p, nil) }

// LogTo is Log to the recipients a accepts.
func (s *Server) LogTo(p protocol.LoggingMessageParams, a Audience) int {
	rank := levelRank(p.Level)
	listens := s.table.listeners()
	n := s.NotifySessions(protocol.NotificationMessage, p, a.sessions(func(sess *Session) bool {
		level := sess.Client().LogLevel
		if level == "" {
			level = DefaultLogLevel
		}
		return rank >= levelRank(level)
	}))
	for _, l := range listens {
		if l.logLevel != "" && rank >= levelRank(l.logLevel) && a.listen(l) && l.notify(protocol.NotificationMessage, p) {
			n++
		}
	}
	return n
}
