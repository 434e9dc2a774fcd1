// Package cluster runs mcpvisor's supervision core as a member of a
// protoactor cluster: every configured MCP server is a grain (kind
// "mcpserver", identity = the server's name), placed on one member by the
// cluster's own rendezvous hashing (disthash), and any member's CallTool
// reaches the member that runs it.
//
// It is the only package of mcpvisor that imports protoactor's cluster,
// remote and membership providers, so that the engine's alpha API touches
// one place. What crosses members is the protobuf envelopes of wire.proto
// (JSON-RPC bytes inside).
//
// # Shape
//
// A Member holds a member-local actors.System. A grain is a thin actor:
// its activation adds its server to the local System (which connects it
// with the same server actor as single-node mode: strikes, backoff,
// parking, OAuth refresh, correlation), its stop removes it. So the local
// System holds exactly the servers whose grains live on this member, and
// the grain's mailbox never waits on I/O: calls run on their own
// goroutines against the local System and answer the caller's future
// directly.
//
// A reconciler on every member makes placement active: on each topology
// change, once the cluster agrees on it, it activates the configured
// servers this member owns, so a dead member's servers reconnect on a
// survivor without waiting for a call. Grains that moved away are stopped
// by the placement actor on the same topology change.
//
// # Rooms
//
//   - member.go: Options, Start, the configured set, Close.
//   - provider.go: the static-peers membership provider (automanaged's
//     protocol) on the member's own endpoint, over mutual TLS with
//     Options.TLS.
//   - tls.go: mutual TLS for both endpoints; the loopback-only rule.
//   - grain.go: the grain actor and the local placement worker.
//   - reconciler.go: activation of owned servers after consensus.
//   - lookup.go: disthash's identity lookup with a race-free Get.
//   - overview.go: the cluster-wide status and tools (Member.Overview).
//   - calls.go, errors.go: CallTool across members and its typed errors.
//   - leave.go: graceful leave (drain, hand over, leave).
//   - events.go: the member's own events (activated, ready, released).
//   - wire.proto, wire.pb.go: what crosses members (make proto).
//   - internal/clustermember: the one-member process the multi-process
//     test runs (a test harness, not part of mcpvisor).
package cluster
