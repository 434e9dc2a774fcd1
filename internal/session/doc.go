// Package session has one job: one MCP client session over one transport
// connection. It correlates requests with their answers, negotiates the
// protocol era, and makes the typed requests a client makes.
//
// A Session is one connection generation. The server actor creates it with
// Open, publishes it to callers while it is ready, and ends it with Close;
// nothing else opens or closes one. Callers use it directly: a call
// registers a waiter, writes its frame from the caller's goroutine, and the
// transport's read goroutine completes the waiter from the response frame.
// There is no goroutine or mailbox hand-off on the response path.
//
// When the connection ends, for whatever reason, every pending call fails
// at once with an error matching ErrConnectionClosed (or the cause given to
// Close, such as ErrServerRestarting), and later calls fail immediately.
//
// # Parts, and who owns their state
//
// A Session is assembled from components, each with one job, held in its
// fields:
//
//   - core (core.go): the correlation table of pending calls, the writing
//     of requests and notifications, cancellation, the end of the session.
//     Its table is guarded by its lock; callers' goroutines register and
//     write, the read goroutine completes.
//   - receiver (receive.go): the transports.Receiver. It runs on the
//     transport's read goroutine(s), routes each frame, and owns the frame
//     counters (atomic).
//   - serverRequests (receive.go, mrtr.go): answers what the server asks
//     (roots, sampling, elicitation, ping) and the input rounds of multi
//     round-trip requests, each on a goroutine of its own that Close waits
//     for.
//   - negotiation (negotiate.go): settles the era on Open's goroutine and
//     writes Peer and the stateless-era _meta before Open returns; they are
//     read-only afterwards.
//   - eraMeta (loglevel.go, capsmeta.go): the _meta every stateless-era
//     request carries and the log level, as atomic pointers to immutable
//     values.
//   - Lists (lists.go, skills.go): the paginated listings and their
//     caching hints (guarded by its lock); reached with Session.Lists.
//   - Subscriptions (listen.go): the subscriptions/listen streams (guarded
//     by its lock; acknowledgements and muting run on the read goroutine);
//     reached with Session.Subscriptions.
//   - reissue and paramHeaders (reissue.go, paramheaders.go): what the last
//     tools/list said of each tool, replaced whole by each listing and read
//     by every call.
//   - spans (tracing.go): the client spans of the requests; immutable after
//     Open.
//
// The requests themselves (Call, CallToolWith, GetPromptWith,
// ReadResourceWith, Complete, Request, Ping, SetLogLevel) are Session's
// methods, and run on the caller's goroutine.
package session
