package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
)

// errStoreUnavailable: the SessionStore failed or timed out; the request
// is answered 503 (the client may retry), never left waiting.
var errStoreUnavailable = errors.New("mcpserver: the session store is unavailable")

// sessionFor returns the HTTP session named sid: the one this Server
// holds, or, with sealed ids, the one sid carries (restored here). A
// sealed session held here is checked against the SessionStore every
// SealOptions.Recheck, so that a DELETE sent to another replica ends it,
// and ends at its max age.
// The error is ErrSessionIDInvalid, ErrSessionExpired or
// ErrSessionDeleted (404), or errStoreUnavailable (503).
func (h *httpTransport) sessionFor(ctx context.Context, sid string) (*Session, error) {
	s := h.srv
	sess := s.table.lookup(sid)
	if h.sealer == nil {
		if sess == nil {
			return nil, ErrSessionIDInvalid
		}
		return sess, nil
	}
	if sess == nil {
		return h.restore(ctx, sid)
	}
	now := s.opts.Now()
	if now.After(h.sealer.Expires(*sess.sealed)) {
		sess.Close()
		return nil, ErrSessionExpired
	}
	sess.mu.Lock()
	due := now.Sub(sess.checkedAt) >= h.seal.Recheck
	if due {
		sess.checkedAt = now
	}
	sess.mu.Unlock()
	if !due {
		return sess, nil
	}
	rec, err := h.loadRecord(ctx, sess.sealed.ID)
	switch {
	case err != nil:
		// A held session goes on while the store is away: only a
		// deletion, once the store says so, ends it.
		s.log.Debug().Err(err).Msg("checking a sealed session against the store")
	case rec.Deleted:
		sess.Close()
		return nil, ErrSessionDeleted
	}
	return sess, nil
}

// restore takes up the session that sealed id sid carries.
func (h *httpTransport) restore(ctx context.Context, sid string) (*Session, error) {
	s := h.srv
	now := s.opts.Now()
	st, err := h.sealer.Open(sid, now)
	if err != nil {
		s.log.Debug().Err(err).Msg("a session id that does not open") // never the id: it is the client's credential
		return nil, err
	}
	rec, err := h.loadRecord(ctx, st.ID)
	if err != nil {
		return nil, err
	}
	if rec.Deleted {
		return nil, ErrSessionDeleted
	}
	sess := h.newHTTPSessionWithID(sid)
	sess.version, sess.clientInfo, sess.caps = st.ProtocolVersion, st.ClientInfo, st.Capabilities
	sess.initialized = true
	sess.sealed, sess.streams.foreign, sess.checkedAt = &st, true, now
	sess.logLevel = rec.Extras.LogLevel
	// What the id carries (at most its length) and the subscriptions are
	// counted, never refused: the session was admitted when it began.
	sess.bytes.initState = int64(len(sid))
	sess.bytes.state = sess.bytes.initState
	for _, uri := range rec.Extras.Subscriptions {
		if sess.subs == nil {
			sess.subs = map[string]struct{}{}
		}
		if _, dup := sess.subs[uri]; !dup {
			sess.subs[uri] = struct{}{}
			sess.bytes.state += uriSize(uri)
		}
	}
	// POST streams are numbered from a random point, so that a
	// Last-Event-ID of a stream of the session's former replica names no
	// stream here (404) rather than another one.
	sess.streams.postSeq = 1<<30 + rand.Uint32N(1<<30)
	if held := s.table.admit(sess, 0); held != sess {
		return held, nil // another request restored it first
	}
	s.log.Debug().Str("client", st.ClientInfo.Name).Str("version", st.ProtocolVersion).Msg("sealed session restored")
	if s.opts.OnSessionRestored != nil {
		s.opts.OnSessionRestored(sess)
	}
	return sess, nil
}

// loadRecord asks the SessionStore about session id, within
// SealOptions.StoreTimeout.
func (h *httpTransport) loadRecord(ctx context.Context, id string) (SessionRecord, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.seal.StoreTimeout)
	defer cancel()
	rec, err := h.seal.Store.Load(ctx, id)
	if err != nil {
		h.srv.log.Debug().Err(err).Msg("session store")
		return rec, errStoreUnavailable
	}
	return rec, nil
}

// sealedID returns the sealed id of the session that initialize m opens,
// with what it carries: the version the Server will negotiate, the
// client's info and capabilities. An initialize whose params do not
// decode gets a sealed id too; it fails, and its session with it.
func (h *httpTransport) sealedID(params json.RawMessage) (string, *SealedSession, error) {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	st := &SealedSession{ID: newSessionID(), ProtocolVersion: h.srv.eras.negotiate(p.ProtocolVersion), Created: h.srv.opts.Now().Unix()}
	_ = json.Unmarshal(p.ClientInfo, &st.ClientInfo)
	_ = json.Unmarshal(p.Capabilities, &st.Capabilities)
	id, err := h.sealer.Seal(*st)
	return id, st, err
}

// deleteSealed records in the SessionStore that sealed session sess
// ended, so that no replica restores it again.
func (h *httpTransport) deleteSealed(ctx context.Context, sess *Session) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.seal.StoreTimeout)
	defer cancel()
	if err := h.seal.Store.Delete(ctx, sess.sealed.ID, h.sealer.Expires(*sess.sealed)); err != nil {
		h.srv.log.Debug().Err(err).Msg("session store")
		return errStoreUnavailable
	}
	return nil
}

// saveExtras records a sealed session's log level and subscriptions in
// the SessionStore, for the replica that serves its next request. A
// store that fails costs the other replicas these extras, not the
// session: it is logged.
func (s *Session) saveExtras() {
	if s.sealed == nil {
		return
	}
	s.mu.Lock()
	x := SessionExtras{LogLevel: s.logLevel}
	for uri := range s.subs {
		x.Subscriptions = append(x.Subscriptions, uri)
	}
	s.mu.Unlock()
	slices.Sort(x.Subscriptions)
	srv := s.srv
	ctx, cancel := context.WithTimeout(context.Background(), srv.http.seal.StoreTimeout)
	defer cancel()
	if err := srv.http.seal.Store.SaveExtras(ctx, s.sealed.ID, x, srv.http.sealer.Expires(*s.sealed)); err != nil {
		srv.log.Debug().Err(err).Msg("saving a sealed session's extras")
	}
}

// answerNoSession answers a request whose session sessionFor did not
// find: 503 when the store was unavailable, else 404.
func answerNoSession(w http.ResponseWriter, err error, write func(status int)) {
	if errors.Is(err, errStoreUnavailable) {
		w.Header().Set("Retry-After", "1")
		write(http.StatusServiceUnavailable)
		return
	}
	write(http.StatusNotFound)
}
