package mcpvisor

import (
	"encoding/json"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Messages of the server actor. Each is one intent; replies travel on a
// channel inside the message (buffered, so the actor never blocks on a
// caller that gave up), never through protoactor futures.

// connectNow asks a server actor to connect (sent by the registry when it
// admits the server). The server's next view carries the ticket, so the
// registry can tell when this attempt has settled.
type connectNow struct {
	ticket uint64
}

// connectResult is the outcome of one connect attempt, sent by the
// attempt's goroutine.
type connectResult struct {
	gen   uint64
	sess  *session.Session // nil on failure
	lists lists
	// listErrs are the lists the server refused with a JSON-RPC error
	// (they are empty in lists), by kind; see listAll.
	listErrs [numListKinds]error
	err      error
	// pinErr is set when the pin store failed (the tools then count as
	// unpinned).
	pinErr error
	// listen is the listen stream the connect opened before listing (nil:
	// none); the actor's listen loop takes it over.
	listen *firstListen
	// last is set when the result is its goroutine's last message, which
	// then counts as its goroutineDone (goroutineEndingWith).
	last bool
}

// lists is what a server offers, as listed at connect or after a
// list_changed notification.
type lists struct {
	tools     []protocol.Tool
	resources []protocol.Resource
	templates []protocol.ResourceTemplate
	prompts   []protocol.Prompt
	// pins is the pin check of tools (nil: all pinned, or no pinning).
	pins *toolPins
}

// connectionLost reports that generation gen's connection ended.
type connectionLost struct {
	gen uint64
	err error
}

// serverNotification carries a notification of generation gen.
type serverNotification struct {
	gen    uint64
	method string
	params json.RawMessage
}

// relisted carries a fresh list of one kind after list_changed.
type relisted struct {
	gen    uint64
	kind   listKind
	lists  lists
	err    error
	pinErr error
}

// relistNow is sent by a list's retry timer when its delay is over: list
// kind again on connection gen (see server_lists.go).
type relistNow struct {
	gen  uint64
	kind listKind
}

// recheckPins asks a server actor to check its tools against the pins
// again (the user approved some).
type recheckPins struct{}

// pinsChecked carries the result of a recheck of tools (the list checked,
// by identity) on generation gen.
type pinsChecked struct {
	gen   uint64
	tools []protocol.Tool
	pins  *toolPins
	err   error
}

// goroutineDone reports that a goroutine the server actor started (a
// session close, a re-list) has finished; it is that goroutine's last
// message to the actor. A connect attempt's goroutine sends none: its
// connectResult, marked last, stands for it.
type goroutineDone struct{}

// shutdown asks a server actor to close its connection and stop.
// done is closed when no process or connection of the server remains.
type shutdown struct {
	done chan struct{}
}

// reconfigure gives a server actor a changed config: it drops its
// connection and waits for admission again (or is disabled).
type reconfigure struct {
	cfg ServerConfig
}

// retune gives a server actor a changed config that keeps its
// connection (see affectsConnection).
type retune struct {
	cfg ServerConfig
}

// serverEvent carries an event a server's notification raised (resource
// updated, log message, progress, channel message, permission request) to
// the registry, which numbers and publishes it.
type serverEvent struct {
	handle *serverHandle
	event  eventRecord
}

// Messages of the registry actor.

// setServers replaces the desired configuration, or with patch set adds
// or replaces the servers given and removes those in drop, leaving the
// others alone.
type setServers struct {
	servers map[string]ServerConfig
	patch   bool
	drop    []string
	reply   chan SetResult
}

// serverChanged tells the registry that a server published a new view.
type serverChanged struct {
	name   string
	handle *serverHandle
	view   *serverView
}

// reconnectServer asks the registry to reconnect one server (or all).
type reconnectServer struct {
	name  string // empty: every enabled server
	reply chan error
}

// wakeServer asks for one connect attempt of a parked server, or the
// first of a lazy one; sent by a call that waits for it.
type wakeServer struct {
	name   string
	handle *serverHandle
}

// toggleServer hides (off) or shows again a server's tools, prompts and
// resources, keeping its connection.
type toggleServer struct {
	name  string
	on    bool
	reply chan error
}

// seqQuery asks for the sequence number of the latest event.
type seqQuery struct {
	reply chan uint64
}

// flushPool asks the registry to rebuild the pool and publish the events
// waiting for it; sent by the registry to itself, so a burst of server
// changes already in its mailbox costs one rebuild.
type flushPool struct{}

// subscribe adds an event subscriber.
type subscribe struct {
	sub   *subscriber
	after uint64 // replay events with Seq > after; 0 replays nothing older than now unless fromStart
	from  bool   // whether after is meaningful
}

// unsubscribe removes an event subscriber.
type unsubscribe struct {
	sub *subscriber
}

// waitSettled asks to be told when every server is settled.
type waitSettled struct {
	done chan struct{}
}

// closeAll shuts every server down; done is closed when all are gone.
type closeAll struct {
	done chan struct{}
}
