// Package mcpserver has one job: the server half of MCP over stdio and
// Streamable HTTP, for every protocol era: what mcpvisor's gateway and its
// mock server share.
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
// # Parts, and who owns their state
//
// A Server holds, in fields:
//
//   - sessionTable (table.go): the sessions that have a channel, HTTP
//     sessions by id, the subscriptions/listen streams, the admission of
//     HTTP sessions by eviction, and whether the Server shuts down. Guarded
//     by its lock, which is taken before any session's, never after.
//   - budget (bounds.go): the bytes the sessions make the Server keep,
//     against Options.MaxSessionState and Options.MaxRetained; lock-free
//     (atomic adds and compare-and-swap).
//   - eras (era.go, headers.go): the versions served and the checks of a
//     stateless-era request's _meta and headers; immutable after New but
//     for atomic memos of the last _meta decoded.
//   - httpTransport (http.go, httpresponse.go, sealed_http.go): the
//     Streamable HTTP front end, on net/http's goroutines; immutable after
//     New but for atomic counters.
//
// The Server's own methods are its public API, the dispatch of a request
// (era checks, then the Middleware chain around the lifecycle methods and
// the Handler) and the fan-out of notifications (fanout.go). A connection
// (conn.go, stdio.go) serves itself: one reading goroutine per
// connection, whose requests run on goroutines of their own (or inline,
// Options.Inline).
//
// A Session guards its own state with its lock; its parts have locks of
// their own, taken after the session's if at all: held (its bytes in the
// budget, guarded by the session's lock), asks (the requests sent to its
// client, waiting for their answers) and httpStreams (an HTTP session's
// resumable POST streams and GET stream count). What a session knows of
// its client is read together with Session.Client.
//
// The package writes nothing to stdout and reads no environment
// variables.
package mcpserver
