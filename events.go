package mcpvisor

import (
	"encoding/json"
	"time"
)

// Event is one entry of the event stream (Subscribe): a pointer to one of
// the event types of this file, each with its own payload beside the
// EventHeader every one of them has. A host switches on the type:
//
//	for ev := range sup.Subscribe(ctx) {
//		switch e := ev.(type) {
//		case *mcpvisor.ServerStateEvent:
//			log.Printf("%s: %s → %s", e.Server, e.Previous, e.State)
//		case *mcpvisor.ToolsChangedEvent:
//			refreshTools(e.Diff)
//		}
//	}
//
// An event encodes to JSON as one flat object: the header's members
// (seq, time, type, server) and the payload's.
//
// Concurrency: an event value is shared by every subscriber it is
// delivered to (and its slices and raw JSON with the replay buffer): read
// it, never modify it.
type Event interface {
	// Header returns what every event has: its sequence number, time,
	// type and server.
	Header() EventHeader
	isEvent()
}

// EventHeader is what every event has. Seq increases by one per event
// for the supervisor's lifetime, so a subscriber can resume after the
// last one it saw (FromSequence); Server is empty for the events of no
// one server (a gap).
type EventHeader struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Server string    `json:"server,omitempty"`
}

// Header returns h.
func (h EventHeader) Header() EventHeader { return h }

func (EventHeader) isEvent() {}

// EventType names what an Event reports; each type has one Go type.
type EventType string

// The event types, and the Go type of each.
const (
	// EventServerState: *ServerStateEvent.
	EventServerState EventType = "server_state"
	// EventServerToggled: *ServerToggledEvent.
	EventServerToggled EventType = "server_toggled"
	// EventToolsChanged: *ToolsChangedEvent.
	EventToolsChanged EventType = "tools_changed"
	// EventPromptsChanged and EventResourcesChanged: *ListChangedEvent.
	EventPromptsChanged   EventType = "prompts_changed"
	EventResourcesChanged EventType = "resources_changed"
	// EventResourceUpdated: *ResourceUpdatedEvent.
	EventResourceUpdated EventType = "resource_updated"
	// EventLogMessage: *LogMessageEvent.
	EventLogMessage EventType = "log_message"
	// EventProgress: *ProgressEvent.
	EventProgress EventType = "progress"
	// EventChannelMessage: *ChannelMessageEvent.
	EventChannelMessage EventType = "channel_message"
	// EventPermissionRequest and EventPermissionAnswered:
	// *PermissionEvent.
	EventPermissionRequest  EventType = "permission_request"
	EventPermissionAnswered EventType = "permission_answered"
	// EventPollChanged: *PollChangedEvent.
	EventPollChanged EventType = "poll_changed"
	// EventTaskStatus: *TaskStatusEvent.
	EventTaskStatus EventType = "task_status"
	// EventToolDefinitionChanged: *ToolDefinitionChangedEvent.
	EventToolDefinitionChanged EventType = "tool_definition_changed"
	// EventCollision: *CollisionEvent.
	EventCollision EventType = "collision"
	// EventAuthRequired: *AuthRequiredEvent.
	EventAuthRequired EventType = "auth_required"
	// EventListFailed: *ListFailedEvent.
	EventListFailed EventType = "list_failed"
	// EventGap: *GapEvent.
	EventGap EventType = "gap"
)

// The reasons of a GapEvent.
const (
	GapSlowSubscriber = "slow-subscriber"
	GapCursorTooOld   = "cursor-too-old"
)

// ServerStateEvent: a server changed state.
type ServerStateEvent struct {
	EventHeader
	State State `json:"state,omitempty"`
	// Previous is empty for a server's first event.
	Previous State `json:"previous,omitempty"`
	// Err is the error that moved the server, if any, and Failure what
	// it means for supervision (ClassifyFailure).
	Err     string      `json:"error,omitempty"`
	Failure FailureKind `json:"failure,omitempty"`
}

// ServerToggledEvent: the host toggled a server off (ToggledOff) or on
// again; its tools, prompts and resources left or rejoined the pool
// (their diffs follow).
type ServerToggledEvent struct {
	EventHeader
	ToggledOff bool `json:"toggledOff,omitempty"`
}

// ToolsChangedEvent: the tools a server offers in the pool changed, after
// a list_changed re-list, a (re)connect, a toggle, a filter change, the
// server leaving the pool, or a rename forced by a collision.
type ToolsChangedEvent struct {
	EventHeader
	// Diff names the pool's tools added, removed and changed (changed:
	// the definition differs, e.g. its schema or description).
	Diff *ListDiff `json:"diff,omitempty"`
	// Tools is the pool's size (MCP tools) after the change.
	Tools int `json:"tools,omitempty"`
}

// ListChangedEvent: the prompts (EventPromptsChanged, by pool name) or
// the resources and templates (EventResourcesChanged, by URI and URI
// template) a server offers changed.
type ListChangedEvent struct {
	EventHeader
	Diff *ListDiff `json:"diff,omitempty"`
}

// ResourceUpdatedEvent: a server said the resource at URI changed
// (notifications/resources/updated); Data holds the notification's
// params.
type ResourceUpdatedEvent struct {
	EventHeader
	URI  string          `json:"uri,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// LogMessageEvent: a server logged a message (notifications/message) at
// Level (debug … emergency); Data holds the notification's params.
type LogMessageEvent struct {
	EventHeader
	Level string          `json:"level,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// ProgressEvent: a server reported progress (notifications/progress);
// Data holds the params (progressToken, progress, total, message).
type ProgressEvent struct {
	EventHeader
	Data json.RawMessage `json:"data,omitempty"`
}

// ChannelMessageEvent: a server pushed a channel message
// (notifications/claude/channel); Data holds {content, meta}, ChannelSeq
// is the channel hub's number of it (ChannelMessage.Seq).
type ChannelMessageEvent struct {
	EventHeader
	Data       json.RawMessage `json:"data,omitempty"`
	ChannelSeq uint64          `json:"channelSeq,omitempty"`
}

// PermissionEvent: a channel server asked the host for a verdict
// (EventPermissionRequest; answer it by PermissionID with
// AnswerPermission), or its verdict settled a request the host relayed
// (EventPermissionAnswered). Data holds the notification's params.
type PermissionEvent struct {
	EventHeader
	Data         json.RawMessage `json:"data,omitempty"`
	PermissionID string          `json:"permissionId,omitempty"`
}

// PollChangedEvent: a polling subscription's result changed (or came in
// for the first time): PollID, URI for a resource poll, Data the result
// (a tools/call or resources/read result).
type PollChangedEvent struct {
	EventHeader
	URI    string          `json:"uri,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	PollID string          `json:"pollId,omitempty"`
}

// TaskStatusEvent: a server reported a task's new status
// (notifications/tasks/status): TaskID, Data the task's state.
type TaskStatusEvent struct {
	EventHeader
	Data   json.RawMessage `json:"data,omitempty"`
	TaskID string          `json:"taskId,omitempty"`
}

// ToolDefinitionChangedEvent: a tool's definition is not the one pinned
// (Options.ToolPins): it changed since the user started relying on it,
// or it is new on a server seen before. Reported once per definition; it
// precedes the ToolsChangedEvent of a tool it withholds.
type ToolDefinitionChangedEvent struct {
	EventHeader
	ToolChange *ToolChange `json:"toolChange,omitempty"`
}

// CollisionEvent: two tools (or prompts) came out with the same pool
// name; Collision says which one was renamed, and to what. Reported once
// per collision, when it first appears.
type CollisionEvent struct {
	EventHeader
	Collision *Collision `json:"collision,omitempty"`
}

// AuthRequiredEvent: a server needs the user to authorize (it is parked
// in needs-auth until Login, or a call); Data holds {reason}.
type AuthRequiredEvent struct {
	EventHeader
	Data json.RawMessage `json:"data,omitempty"`
}

// ListFailedEvent: a ready server refused a listing with a JSON-RPC
// error. It stays ready without that list (ServerStatus.ListErrors), and
// the listing is retried with backoff on the same connection; when one
// succeeds, the list's *_changed event says what arrived.
type ListFailedEvent struct {
	EventHeader
	// List is tools, resources or prompts; Err is the server's error.
	List string `json:"list,omitempty"`
	Err  string `json:"error,omitempty"`
}

// GapEvent: the subscriber missed Dropped events, because it read too
// slowly (GapReason GapSlowSubscriber) or because its resume cursor was
// older than the buffer (GapCursorTooOld).
type GapEvent struct {
	EventHeader
	Dropped   uint64 `json:"dropped,omitempty"`
	GapReason string `json:"gapReason,omitempty"`
}

// ListDiff is what changed in one server's list of one kind, by pool name
// (qualified name for tools and prompts, URI for resources). Each slice is
// sorted.
type ListDiff struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

// Empty reports whether nothing changed.
func (d *ListDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0
}

// Collision reports a pool name claimed twice. The holder (a host
// built-in, or the server first by name, then the tool first by name)
// keeps Name; the other is offered as Renamed.
type Collision struct {
	// Kind is "tool" or "prompt".
	Kind string `json:"kind"`
	// Name is the contested pool name.
	Name string `json:"name"`
	// Holder is who keeps Name: "server/tool", or "built-in".
	Holder string `json:"holder"`
	// Server and Original name the renamed entry as its server lists it.
	Server   string `json:"server"`
	Original string `json:"original"`
	// Renamed is the name it is offered under instead.
	Renamed string `json:"renamed"`
}

// ToolChange describes a tool whose definition is not the pinned one
// (ToolDefinitionChangedEvent).
type ToolChange struct {
	// Tool is the server's name for the tool; Name the name it has (or
	// would have) in the pool.
	Tool string `json:"tool"`
	Name string `json:"name"`
	// Change is "changed" (the definition differs from its pin) or "new"
	// (a tool without a pin, from a server seen before).
	Change string `json:"change"`
	// Action says whether the tool is withheld from the pool or offered.
	Action PinAction `json:"action"`
	// Diff says what differs from the pin, member by member (see
	// trust.Diff).
	Diff string `json:"diff"`
	// Hash identifies the definition listed (trust.ToolHash): what an
	// approval pins.
	Hash string `json:"hash"`
}

// unknownEvent carries an event of a type this file does not declare: a
// new kind the actors publish before it gets a type of its own here. It
// encodes to JSON as the actors' event did.
type unknownEvent struct {
	EventHeader
	raw any
}

// MarshalJSON implements json.Marshaler.
func (e *unknownEvent) MarshalJSON() ([]byte, error) { return json.Marshal(e.raw) }

// eventConverter builds the typed event of each numbered record once for
// all the subscribers it is delivered to (the bus offers it to them one
// after the other), so that typed events cost one allocation per event,
// not one per subscriber; they share the value (see Event's Concurrency).
//
// Concurrency: convert runs on the registry actor's goroutine only
// (subscribeAs); nothing else touches the converter.
type eventConverter struct {
	seq  uint64
	last Event
}

func (c *eventConverter) convert(e eventRecord) Event {
	if e.Seq != 0 && e.Seq == c.seq {
		return c.last
	}
	ev := eventOf(e)
	if e.Seq != 0 { // a gap (sequence number 0) is each subscriber's own
		c.seq, c.last = e.Seq, ev
	}
	return ev
}

// eventOf is the typed event of a record the registry published.
func eventOf(e eventRecord) Event {
	h := EventHeader{Seq: e.Seq, Time: e.Time, Type: e.Type, Server: e.Server}
	switch h.Type {
	case EventServerState:
		return &ServerStateEvent{EventHeader: h, State: e.State, Previous: e.Previous, Err: e.Err, Failure: e.Failure}
	case EventServerToggled:
		return &ServerToggledEvent{EventHeader: h, ToggledOff: e.ToggledOff}
	case EventToolsChanged:
		return &ToolsChangedEvent{EventHeader: h, Diff: e.Diff, Tools: e.Tools}
	case EventPromptsChanged, EventResourcesChanged:
		return &ListChangedEvent{EventHeader: h, Diff: e.Diff}
	case EventResourceUpdated:
		return &ResourceUpdatedEvent{EventHeader: h, URI: e.URI, Data: e.Data}
	case EventLogMessage:
		return &LogMessageEvent{EventHeader: h, Level: e.Level, Data: e.Data}
	case EventProgress:
		return &ProgressEvent{EventHeader: h, Data: e.Data}
	case EventChannelMessage:
		return &ChannelMessageEvent{EventHeader: h, Data: e.Data, ChannelSeq: e.ChannelSeq}
	case EventPermissionRequest, EventPermissionAnswered:
		return &PermissionEvent{EventHeader: h, Data: e.Data, PermissionID: e.PermissionID}
	case EventPollChanged:
		return &PollChangedEvent{EventHeader: h, URI: e.URI, Data: e.Data, PollID: e.PollID}
	case EventTaskStatus:
		return &TaskStatusEvent{EventHeader: h, Data: e.Data, TaskID: e.TaskID}
	case EventToolDefinitionChanged:
		return &ToolDefinitionChangedEvent{EventHeader: h, ToolChange: e.ToolChange}
	case EventCollision:
		return &CollisionEvent{EventHeader: h, Collision: e.Collision}
	case EventAuthRequired:
		return &AuthRequiredEvent{EventHeader: h, Data: e.Data}
	case EventListFailed:
		return &ListFailedEvent{EventHeader: h, List: e.List, Err: e.Err}
	case EventGap:
		return &GapEvent{EventHeader: h, Dropped: e.Dropped, GapReason: e.GapReason}
	}
	// A kind this file does not know: its header, and nothing lost
	// silently in JSON either (the record, as it was).
	return &unknownEvent{EventHeader: h, raw: e}
}

// eventRecord is how the engine publishes an event: one flat record, the
// members of every event type side by side, numbered by the registry
// (Seq, Time) and kept in the bus's replay ring; which members are set
// depends on Type. A subscriber receives it as its typed Event
// (eventConverter), built once per record. Concurrency: immutable once
// the registry published it.
type eventRecord struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Server string    `json:"server,omitempty"`

	// State, Previous (empty for a server's first event), Err and Failure
	// (what Err means for supervision, see ClassifyFailure) describe an
	// EventServerState.
	State    State       `json:"state,omitempty"`
	Previous State       `json:"previous,omitempty"`
	Err      string      `json:"error,omitempty"`
	Failure  FailureKind `json:"failure,omitempty"`

	// ToggledOff describes an EventServerToggled.
	ToggledOff bool `json:"toggledOff,omitempty"`

	// Diff describes the *_changed events; Tools is the pool's size after
	// an EventToolsChanged.
	Diff  *ListDiff `json:"diff,omitempty"`
	Tools int       `json:"tools,omitempty"`

	// URI names the resource of an EventResourceUpdated.
	URI string `json:"uri,omitempty"`
	// Level is the severity of an EventLogMessage (debug … emergency).
	Level string `json:"level,omitempty"`
	// Data is the notification's params, for the events that carry one
	// (log message, progress, channel message, permission request).
	Data json.RawMessage `json:"data,omitempty"`

	// PermissionID is the short ID of an EventPermissionRequest or
	// EventPermissionAnswered.
	PermissionID string `json:"permissionId,omitempty"`
	// TaskID names the task of an EventTaskStatus.
	TaskID string `json:"taskId,omitempty"`
	// PollID names the polling subscription of an EventPollChanged.
	PollID string `json:"pollId,omitempty"`
	// ChannelSeq is the channel hub's number of an EventChannelMessage
	// (ChannelMessage.Seq).
	ChannelSeq uint64 `json:"channelSeq,omitempty"`

	// List names the list of an EventListFailed: tools, resources or
	// prompts.
	List string `json:"list,omitempty"`

	// Collision describes an EventCollision.
	Collision *Collision `json:"collision,omitempty"`

	// ToolChange describes an EventToolDefinitionChanged.
	ToolChange *ToolChange `json:"toolChange,omitempty"`

	// Dropped and GapReason describe an EventGap.
	Dropped   uint64 `json:"dropped,omitempty"`
	GapReason string `json:"gapReason,omitempty"`
}
