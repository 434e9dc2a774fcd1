package mcpvisor

import (
	"encoding/json"
	"time"
)

// Event is one entry of the supervisor's event stream. Seq increases by
// one per event for the supervisor's lifetime, so a subscriber can resume
// after the last one it saw. Which fields are set depends on Type.
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
