// Package actors is mcpvisor's actor machinery, on protoactor-go, and
// nothing else: it knows no MCP server, configuration or host type. The
// supervision behaviours that use it (the registry actor, one server
// actor per configured server, the call path) live in package mcpvisor,
// beside the types they work on.
//
// It provides:
//
//   - NewSystem: a protoactor actor system that logs through the host's
//     zerolog logger (ProtoactorLogger, which the cluster uses for its own
//     system too);
//   - RegistryProps and ChildProps: the supervision strategy. A parent
//     (the registry) resumes after its own crash with its state; a child
//     (a server actor) restarts into a clean state, and is stopped after
//     three crashes within a minute. Every actor's panic is logged with
//     its stack before supervision handles it;
//   - Dispatcher: runs mailboxes, and the goroutines an actor starts, on
//     goroutines kept warm between uses;
//   - package admission: the connect scheduler (slots for local and
//     remote servers, fair order), a plain type its users guard.
//
// # Who owns what
//
// An actor's state is touched only by its Receive, which protoactor runs
// on one goroutine at a time (a Dispatcher worker, or a goroutine of its
// own). The Dispatcher's fields are read-only or atomic; its Schedule, Go
// and Stop may be called from any goroutine. NewSystem's caller owns the
// actor system and shuts it down; the Dispatcher's owner stops it after
// the system, when no mailbox is left to run.
package actors
