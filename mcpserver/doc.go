// Package mcpserver is the server half of MCP over stdio and Streamable
// HTTP, for every protocol era: what mcpvisor's gateway and its mock
// server share.
//
// A Server owns the protocol: JSON-RPC framing and dispatch, the
// handshake eras (initialize, notifications/initialized, Mcp-Session-Id
// sessions, standalone GET streams with numbered events replayed after
// Last-Event-ID, DELETE), the stateless era 2026-07-28 (server/discover,
// the _meta every request carries, the HTTP headers that mirror it,
// subscriptions/listen streams), logging/setLevel, ping, cancellation,
// the fan-out of list_changed and other notifications to every session
// and listen stream that takes them, and the requests a server sends its
// client (sampling, elicitation, roots), matched with their answers.
//
// What the server offers (tools, prompts, resources, completions, tasks,
// skills, and anything else) is its Handler's: the Server hands every
// request it does not answer itself to Handler.ServeMCP, with a
// ResponseWriter that answers it, carries notifications on the request's
// own stream (progress) and asks the client for input.
//
// The transports: ServeStdio (newline-delimited JSON-RPC), HTTPHandler
// (Streamable HTTP: JSON answers, or event streams, resumable when
// HTTPOptions.SSEResponses is set, or ended for the client to poll for a
// long answer with HTTPOptions.PollAfter) and ServeConn (any connection that
// carries one message at a time, such as a WebSocket).
//
// Seams: Options.Middleware wraps the dispatch of every request
// (lifecycle methods included); Options.FrameHook writes every message
// the server sends, in place of the transport's plain framing;
// ResponseWriter.ReplyWith lets a handler write its answer on the wire
// itself; a Disconnecter ends an HTTP response early. A test server that
// misbehaves on purpose (bench/mockserver) builds its faults from these,
// and the package holds none.
//
// The package writes nothing to stdout and reads no environment
// variables.
package mcpserver
