// Package actors is mcpvisor's supervision core, built on protoactor-go:
// one server actor per configured MCP server, which alone owns that
// server's connection, and one registry actor, which owns the set of
// server actors, admits their connects, assembles the tool pool and
// publishes events. It is the only package that imports protoactor.
//
// Callers do not talk to the actors for every request. The server actor
// publishes an immutable view of its state (including the live session)
// and the registry publishes the tool pool; a call reads both and goes
// straight to the session. Lifecycle changes — connect, teardown,
// configuration — always go through the actors' mailboxes.
//
// # Rooms
//
// Each file has one job; a reader looking for something starts here.
//
//   - The System and what callers use: system.go (Start, lifecycle
//     requests, Close), calls.go (the call path: route a name to a
//     server, wait for it to be ready, run the request on its session),
//     queries.go (the pool and status, read from snapshots).
//   - The server actor, one per server, and its connection: server.go
//     (messages, connect, teardown), server_notify.go (notifications and
//     re-lists), reconnect.go (strikes, backoff, pings, listen streams),
//     liveness.go (noticing a silent server), auth.go and asclient.go
//     (its token source and authorization HTTP client),
//     pins.go (tool definition pins), discovery.go (the lazy servers'
//     cache), handle.go (what the registry and callers hold of a server:
//     the handle and its immutable views).
//   - The registry actor, one per System: registry.go (the configured
//     set, its changes and shutdown), registry_admission.go and
//     admission_gate.go with package admission (the connect scheduler, a
//     plain type behind a mutex the connect goroutines share), registry_flush.go
//     (rebuilding the pool and publishing events), bus.go (the event ring
//     and subscribers).
//   - The tool pool, functions over the servers' views: pool.go (the
//     snapshot and its lookups), pool_names.go (qualified names and
//     collisions), pool_offer.go (what one server view offers),
//     pool_next.go (the one way a pool is made: which servers changed,
//     or all of them in a rebase), pool_contribution.go (what one server
//     puts in), pool_apply.go (taking entries out and putting them in,
//     claiming names), pool_diff.go (the events that say what changed).
//   - Host-side features: host.go (the host's state shared by servers),
//     host_requests.go (roots, sampling, elicitation), host_channels.go,
//     host_progress.go, host_subscriptions.go and host_listen.go
//     (resource subscriptions, polled and streamed), host_tasks.go,
//     host_complete.go, host_skills.go, host_passthrough.go.
//   - Plumbing: dispatcher.go (the mailbox dispatcher), messages.go,
//     deadline.go, logging.go, latency.go, failure.go, policy.go,
//     state.go and config.go (public types), transport.go (dialing).
package actors
