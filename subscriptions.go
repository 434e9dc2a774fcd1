package mcpvisor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
)

// PollSpec says what a polling subscription polls: a tool call (Tool, a
// pool name, with Args) or a resource read (Server and URI), every
// Interval.
type PollSpec struct {
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`

	Server string `json:"server,omitempty"`
	URI    string `json:"uri,omitempty"`

	// Interval between polls; zero means DefaultPollInterval, and less
	// than MinPollInterval is raised to it.
	Interval time.Duration `json:"interval,omitempty"`
}

// Polling intervals.
const (
	MinPollInterval     = actors.MinPollInterval
	DefaultPollInterval = actors.DefaultPollInterval
)

// Errors of subscriptions.
var (
	ErrSubscribeUnsupported = actors.ErrSubscribeUnsupported
	ErrSubscriptionRefused  = actors.ErrSubscriptionRefused
	ErrUnknownPoll          = actors.ErrUnknownPoll
)

// SubscribeResource subscribes to updates of a server's resource: each
// update is an EventResourceUpdated. Handshake-era servers get
// resources/subscribe; 2026-07-28 servers a subscriptions/listen stream
// selecting every subscribed URI, replaced by one with the new set on each
// change, and SubscribeResource returns once the server acknowledged it
// (ErrSubscriptionRefused when the acknowledgement leaves the URI out).
// The subscription is sent again on every new connection of the server
// until UnsubscribeResource. Servers that did not declare
// resources.subscribe fail with ErrSubscribeUnsupported.
func (s *Supervisor) SubscribeResource(ctx context.Context, server, uri string) error {
	return hostErr(s.sys.SubscribeResource(ctx, server, uri))
}

// UnsubscribeResource ends a resource subscription.
func (s *Supervisor) UnsubscribeResource(ctx context.Context, server, uri string) error {
	return s.sys.UnsubscribeResource(ctx, server, uri)
}

// ResourceSubscriptions returns the URIs subscribed on a server.
func (s *Supervisor) ResourceSubscriptions(server string) []string {
	return s.sys.ResourceSubscriptions(server)
}

// SubscribePolling polls a tool call or a resource read at an interval and
// publishes an EventPollChanged for the first result and for every result
// that differs from the one before; polling carries on across reconnects
// until UnsubscribePolling or Close. It returns the subscription's id.
func (s *Supervisor) SubscribePolling(spec PollSpec) (string, error) {
	return s.sys.SubscribePolling(actors.PollSpec(spec))
}

// UnsubscribePolling stops a polling subscription (ErrUnknownPoll for an
// unknown id); it returns once the poller has stopped.
func (s *Supervisor) UnsubscribePolling(id string) error { return s.sys.UnsubscribePolling(id) }

// Polls returns the live polling subscriptions by id.
func (s *Supervisor) Polls() map[string]PollSpec {
	out := map[string]PollSpec{}
	for id, spec := range s.sys.Polls() {
		out[id] = PollSpec(spec)
	}
	return out
}
