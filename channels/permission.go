package channels

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// IDAlphabet is the alphabet of permission short IDs: the lowercase
// letters without "l", which reads like "1" and "I" (Claude Code's
// alphabet, so channel servers that parse "yes abcde" replies accept
// mcpvisor's IDs).
const IDAlphabet = "abcdefghijkmnopqrstuvwxyz"

// IDLength is the length of a permission short ID.
const IDLength = 5

// DefaultPermissionTTL is how long a permission request waits for an
// answer when the relay is given no TTL.
const DefaultPermissionTTL = 5 * time.Minute

// The behaviors of a permission verdict.
const (
	BehaviorAllow = "allow"
	BehaviorDeny  = "deny"
)

// Errors of the permission relay.
var (
	// ErrUnknownPermission: no permission request has that ID (never
	// issued, mistyped, or answered and forgotten).
	ErrUnknownPermission = errors.New("channels: unknown permission request")
	// ErrPermissionExpired: the request's time to answer is over.
	ErrPermissionExpired = errors.New("channels: permission request expired")
	// ErrPermissionAnswered: the request was already answered (the
	// first answer applies).
	ErrPermissionAnswered = errors.New("channels: permission request already answered")
)

// PermissionRequest is the params of
// notifications/claude/channel/permission_request.
type PermissionRequest struct {
	// RequestID is the short ID the user types to answer.
	RequestID string `json:"request_id"`
	// ToolName is the tool that wants approval (Bash, Write, …).
	ToolName string `json:"tool_name"`
	// Description is a human-readable summary of the call.
	Description string `json:"description"`
	// InputPreview is the call's arguments as JSON, cut to
	// MaxInputPreview bytes.
	InputPreview string `json:"input_preview"`
}

// MaxInputPreview is the longest InputPreview sent, in bytes.
const MaxInputPreview = 200

// PermissionVerdict is the params of notifications/claude/channel/permission.
type PermissionVerdict struct {
	RequestID string `json:"request_id"`
	Behavior  string `json:"behavior"`
}

// Answer is how a permission request was settled.
type Answer struct {
	// Allow is the verdict.
	Allow bool
	// By is who answered: the configured name of the channel server
	// whose verdict came first, or "" when the host answered itself.
	By string
	// At is when the answer was recorded.
	At time.Time
}

// Pending is one permission request waiting for its answer.
type Pending struct {
	// ID is the short ID (IDLength letters from IDAlphabet).
	ID string
	// Server is the channel server that asked, for a request a server
	// sent to the host; "" for a request the host relays to its channel
	// servers.
	Server string
	// Request is the request as sent (RequestID is the server's own id
	// for a request a server sent; ID otherwise).
	Request PermissionRequest
	// Created and Expires bound its life.
	Created, Expires time.Time

	relay  *Relay
	done   chan struct{} // closed when answered or expired
	answer Answer        // set before done is closed
	err    error         // ErrPermissionExpired when it expired unanswered
}

// Done is closed when the request is answered or expires.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait blocks until the request is answered, it expires
// (ErrPermissionExpired) or ctx ends.
func (p *Pending) Wait(ctx context.Context) (Answer, error) {
	t := time.NewTimer(time.Until(p.Expires))
	defer t.Stop()
	select {
	case <-p.done:
		return p.answer, p.err
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-t.C:
		p.relay.expire(p)
		<-p.done
		return p.answer, p.err
	}
}

// expire settles p as expired, unless it was answered meanwhile.
func (r *Relay) expire(p *Pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[p.ID] == p {
		r.expireLocked(p)
	}
}

// expireLocked settles live request p as expired. r.mu held.
func (r *Relay) expireLocked(p *Pending) {
	delete(r.live, p.ID)
	r.remember(p.ID, true, p.Expires)
	p.err = fmt.Errorf("%w: %s", ErrPermissionExpired, p.ID)
	close(p.done)
}

// Result returns the answer once Done is closed; before that it reports
// false.
func (p *Pending) Result() (Answer, error, bool) {
	select {
	case <-p.done:
		return p.answer, p.err, true
	default:
		return Answer{}, nil, false
	}
}

// Relay is the table of permission requests waiting for an answer, by
// short ID. IDs are unique among the live and recently expired or
// answered requests, so a late answer is never taken for another
// request's.
//
// Concurrency: safe for concurrent use; mu guards the maps.
type Relay struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	live map[string]*Pending
	// settled remembers answered and expired IDs (until their time
	// would have run out twice over, or at most maxSettled of them), so
	// that an answer to one says why it is refused.
	settled map[string]settled
}

type settled struct {
	expired bool // expired rather than answered
	until   time.Time
}

const maxSettled = 4096

// NewRelay returns a relay whose requests live ttl (zero or less means
// DefaultPermissionTTL).
func NewRelay(ttl time.Duration) *Relay {
	if ttl <= 0 {
		ttl = DefaultPermissionTTL
	}
	return &Relay{ttl: ttl, now: time.Now, live: map[string]*Pending{}, settled: map[string]settled{}}
}

// Open registers a request and gives it a fresh short ID. server is ""
// for a request the host relays to its channel servers (req.RequestID is
// then set to the ID), or the server that sent the request (req.RequestID
// is then its own id, kept to answer it). ttl overrides the relay's when
// positive. InputPreview is cut to MaxInputPreview bytes.
func (r *Relay) Open(server string, req PermissionRequest, ttl time.Duration) *Pending {
	if ttl <= 0 {
		ttl = r.ttl
	}
	req.InputPreview = cut(req.InputPreview, MaxInputPreview)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.sweep(now)
	id := r.freshID()
	if server == "" {
		req.RequestID = id
	}
	p := &Pending{relay: r, ID: id, Server: server, Request: req, Created: now, Expires: now.Add(ttl), done: make(chan struct{})}
	r.live[id] = p
	return p
}

// freshID draws IDs until one is in use by no live or remembered
// request. r.mu held.
func (r *Relay) freshID() string {
	var buf [16]byte
	for {
		id := make([]byte, 0, IDLength)
		for len(id) < IDLength {
			if _, err := rand.Read(buf[:]); err != nil {
				panic(err) // crypto/rand does not fail on supported platforms
			}
			for _, b := range buf {
				// 250 = 10 × 25: larger bytes would bias the draw.
				if b < 250 && len(id) < IDLength {
					id = append(id, IDAlphabet[int(b)%len(IDAlphabet)])
				}
			}
		}
		if _, ok := r.live[string(id)]; ok {
			continue
		}
		if _, ok := r.settled[string(id)]; ok {
			continue
		}
		return string(id)
	}
}

// Answer settles request id with allow; by names the channel server
// answering, or "" for the host. It returns the request, or
// ErrUnknownPermission, ErrPermissionExpired or ErrPermissionAnswered.
// IDs are matched case-insensitively, ignoring surrounding spaces, as a
// user types them.
func (r *Relay) Answer(id string, allow bool, by string) (*Pending, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.sweep(now)
	p, ok := r.live[id]
	if !ok {
		if s, ok := r.settled[id]; ok {
			if s.expired {
				return nil, fmt.Errorf("%w: %q", ErrPermissionExpired, id)
			}
			return nil, fmt.Errorf("%w: %q", ErrPermissionAnswered, id)
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownPermission, id)
	}
	delete(r.live, id)
	r.remember(id, false, p.Expires)
	p.answer = Answer{Allow: allow, By: by, At: now}
	close(p.done)
	return p, nil
}

// Lookup returns the live request with that ID.
func (r *Relay) Lookup(id string) (*Pending, bool) {
	id = strings.ToLower(strings.TrimSpace(id))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep(r.now())
	p, ok := r.live[id]
	return p, ok
}

// Live returns the requests still waiting, oldest first.
func (r *Relay) Live() []*Pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep(r.now())
	out := make([]*Pending, 0, len(r.live))
	for _, p := range r.live {
		out = append(out, p)
	}
	for i := 1; i < len(out); i++ { // few entries: insertion sort by creation
		for j := i; j > 0 && out[j].Created.Before(out[j-1].Created); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// sweep expires the live requests whose time is over and forgets old
// settled IDs. r.mu held.
func (r *Relay) sweep(now time.Time) {
	for _, p := range r.live {
		if !now.Before(p.Expires) {
			r.expireLocked(p)
		}
	}
	for id, s := range r.settled {
		if now.After(s.until) {
			delete(r.settled, id)
		}
	}
}

// remember keeps a settled ID for as long again as its request lived.
// r.mu held.
func (r *Relay) remember(id string, expired bool, expires time.Time) {
	if len(r.settled) >= maxSettled {
		var oldest string
		var at time.Time
		for k, s := range r.settled {
			if oldest == "" || s.until.Before(at) {
				oldest, at = k, s.until
			}
		}
		delete(r.settled, oldest)
	}
	r.settled[id] = settled{expired: expired, until: expires.Add(r.ttl)}
}

// cut shortens s to at most n bytes on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
