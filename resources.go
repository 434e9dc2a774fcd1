package mcpvisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Resources returns the servers' resources: their lists, reads and
// subscriptions to updates.
func (s *Supervisor) Resources() Resources { return Resources{s} }

// Resources is what a Supervisor offers of its servers' resources (MCP
// resources/list, resources/read, resources/subscribe): a handle got from
// Supervisor.Resources, safe for concurrent use like the Supervisor.
type Resources struct{ s *Supervisor }

// List returns the resources and resource templates of one
// server, or of every server when server is empty (sorted by server, then
// URI; every page of the server's lists). A named server that is not
// ready is a *NotReadyError; one toggled off, ErrServerOff.
func (rs Resources) List(server string) ([]Resource, []ResourceTemplate, error) {
	s := rs.s
	p := s.pool.Load()
	if server == "" {
		return append([]Resource(nil), p.resources...), append([]ResourceTemplate(nil), p.templates...), nil
	}
	if err := s.offered(p, server); err != nil {
		return nil, nil, err
	}
	var resources []Resource
	var templates []ResourceTemplate
	for _, r := range p.resources {
		if r.Server == server {
			resources = append(resources, r)
		}
	}
	for _, t := range p.templates {
		if t.Server == server {
			templates = append(templates, t)
		}
	}
	return resources, templates, nil
}

// Read reads the resource at uri from server.
func (rs Resources) Read(ctx context.Context, server, uri string) (*protocol.ReadResourceResult, error) {
	s := rs.s
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.ReadResourceResult, error) {
		return sess.ReadResource(ctx, uri)
	})
}

// ReadWith is Read with options.
func (rs Resources) ReadWith(ctx context.Context, server, uri string, o RequestOptions) (*protocol.ReadResourceResult, error) {
	s := rs.s
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.ReadResourceResult, error) {
		return sess.ReadResourceWith(ctx, uri, o.session())
	})
}

// Subscribe subscribes to updates of a server's resource: each
// update is an EventResourceUpdated. Handshake-era servers get
// resources/subscribe; 2026-07-28 servers a subscriptions/listen stream
// selecting every subscribed URI, replaced by one with the new set on each
// change, and Subscribe returns once the server acknowledged it
// (ErrSubscriptionRefused when the acknowledgement leaves the URI out).
// The subscription is sent again on every new connection of the server
// until Unsubscribe. Servers that did not declare
// resources.subscribe fail with ErrSubscribeUnsupported.
func (rs Resources) Subscribe(ctx context.Context, server, uri string) error {
	s := rs.s
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	subs := s.opts.host.subs
	_, err = onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (struct{}, error) {
		if !supportsSubscribe(sess) {
			return struct{}{}, fmt.Errorf("%w: %q", ErrSubscribeUnsupported, server)
		}
		// Recorded before sending, so that a reconnect racing this
		// request restores it.
		subs.mu.Lock()
		if subs.resources[server] == nil {
			subs.resources[server] = map[string]bool{}
		}
		subs.resources[server][uri] = true
		subs.mu.Unlock()
		if listensForResources(sess) {
			agreed, err := subs.applyModern(ctx, server, sess, s.log)
			if err == nil && !agreed[uri] {
				err = fmt.Errorf("%w: %q on %q (the subscriptions/listen acknowledgement left it out)", ErrSubscriptionRefused, uri, server)
			}
			return struct{}{}, err
		}
		return struct{}{}, sess.Call(ctx, protocol.MethodResourcesSubscribe, protocol.SubscribeParams{URI: uri}, nil)
	})
	if err != nil && !errors.Is(err, ErrSubscribeUnsupported) {
		var lost *ConnectionLostError
		if errors.As(err, &lost) {
			return nil // recorded: the next connection subscribes
		}
		subs.mu.Lock()
		delete(subs.resources[server], uri)
		subs.mu.Unlock()
	}
	return err
}

// Unsubscribe ends a resource subscription.
func (rs Resources) Unsubscribe(ctx context.Context, server, uri string) error {
	s := rs.s
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	subs := s.opts.host.subs
	subs.mu.Lock()
	had := subs.resources[server][uri]
	delete(subs.resources[server], uri)
	subs.mu.Unlock()
	if !had {
		return nil
	}
	v, err := ready(h)
	if err != nil || !supportsSubscribe(v.sess) {
		return nil // the next connection simply does not subscribe
	}
	ctx, cancel := withDefaultTimeout(ctx, s.opts.callTimeout(h))
	defer cancel()
	if listensForResources(v.sess) {
		_, err := subs.applyModern(ctx, server, v.sess, s.log)
		return err
	}
	return v.sess.Call(ctx, protocol.MethodResourcesUnsubscribe, protocol.SubscribeParams{URI: uri}, nil)
}

// Subscriptions returns the URIs subscribed on a server.
func (rs Resources) Subscriptions(server string) []string {
	s := rs.s
	return s.opts.host.subs.uris(server)
}
