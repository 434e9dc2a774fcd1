package cluster

import "time"

// EventType names what a member's Event reports.
type EventType string

// The member's own events, in the order a server goes through them on
// one member: activated (its grain started here), ready (its connection
// is up, from the local System's events), released (its grain stopped
// and the local System no longer holds it).
const (
	EventActivated EventType = "activated"
	EventReady     EventType = "ready"
	EventReleased  EventType = "released"
	// EventFenced (Server empty): the cluster removed this member (it
	// was cut off) and the member released every server (Member.Fenced).
	EventFenced EventType = "fenced"
)

// Event is one thing a member did with a server. Tests count activations
// from these (not from the cluster's view); a host may log them.
type Event struct {
	Type   EventType `json:"type"`
	Server string    `json:"server"`
	// Member is the member's id (Member.ID).
	Member string    `json:"member"`
	Time   time.Time `json:"time"`
}
