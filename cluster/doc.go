// Package cluster runs mcpvisor supervisors as the members of one
// cluster. Its one job: every configured MCP server runs on exactly one
// member, and every member offers the whole cluster's pool (Member: Tools,
// Status, Subscribe, CallTool) as a mcpvisor.Supervisor offers its own.
// Subpackage etcdstore keeps in etcd what the members must share (OAuth
// credentials, the gateway's sealed sessions).
//
// It imports the root package and is imported by no part of mcpvisor but
// cmd/mcpvisor and bench: it is the only package that links protoactor's
// cluster, remote and membership providers, gRPC and etcd, so a host that
// runs one node links none of them. What crosses members is the protobuf
// envelopes of wire.proto (JSON-RPC bytes and the root's types as JSON
// inside).
//
// # Shape
//
// A Member is the host's side: a view of the cluster-wide pool and an
// event stream derived from it. Its engine (engine.go) is its place in the
// protoactor cluster. Each member runs a member-local mcpvisor.Supervisor
// that holds exactly the servers placed on it. Every configured server is
// a grain (kind "mcpserver", identity = the server's name) placed on one
// member by the cluster's own rendezvous hashing (disthash). A grain is a
// thin actor: its activation adds its server to the local Supervisor
// (which connects it with the same server actor as single-node mode:
// strikes, backoff, parking, OAuth refresh), its stop removes it; calls
// run on goroutines of their own against the local Supervisor, so the
// grain's mailbox never waits on I/O. A reconciler on every member makes
// placement active: on each topology change, once the members agree on
// it, it activates the configured servers this member owns, so a dead
// member's servers reconnect on a survivor without waiting for a call.
//
// # Who owns what
//
//   - The refresher goroutine (view.go) is the one writer of a Member's
//     view (Tools, Status) and the one publisher of its events; it
//     re-reads the pool from every member when the engine signals a
//     change, and every Options.Refresh.
//   - The event bus (bus.go) guards its subscribers with its own lock.
//   - The engine's configured set and draining flag are guarded by its
//     mutex; its goroutines are the placement worker (the one caller of
//     the local Supervisor's PatchServers), the reconciler, the pusher
//     (poolWatch: sends this member's snapshot to the others), the
//     removals (fencing: tells removed members so), and the pump of the
//     local Supervisor's events. Close ends them all.
//   - fencing (fence.go) guards the members this member saw leave with
//     its own lock and fences the member once; poolWatch (poolwatch.go)
//     tells the host of pool changes and wakes the pusher.
//   - protoactor's actors: the grains, the overview actor (answers from
//     the local Supervisor's published snapshots) and the member actor
//     (hand-over and fencing).
//
// # Rooms
//
//   - member.go: Member and Options, the host's API.
//   - view.go, bus.go: the cluster-wide view and its event stream.
//   - engine.go: the engine: start, the configured set, close.
//   - provider.go, membership.go: the static-peers membership provider
//     (automanaged's protocol, over mutual TLS with Options.TLS) and the
//     etcd one.
//   - tls.go: mutual TLS for both endpoints; the loopback-only rule.
//   - grain.go: the grain actor and the local placement worker.
//   - reconciler.go: activation of owned servers after consensus.
//   - handover.go, fence.go, departures.go: a server on one member at a
//     time; a cut-off member that comes back (fencing); calls on a member
//     that died, and no call to a member that announced it drains.
//   - lookup.go: disthash's identity lookup with a race-free Get.
//   - overview.go, poolwatch.go: the cluster-wide status and tools, and
//     the pushes that keep them fresh (poolWatch).
//   - calls.go, errors.go: calls across members and their typed errors.
//   - leave.go: graceful leave (drain, hand over, leave).
//   - events.go: the member's own events (activated, ready, released).
//   - wire.proto, wire.pb.go: what crosses members (make proto).
//   - internal/clustermember: the one-member process the multi-process
//     tests and bench/cluster run (a test harness, not part of mcpvisor).
package cluster
