package cluster

import "time"

// MemberEventType names what a MemberEvent reports.
type MemberEventType string

// A member's own events, in the order a server goes through them on one
// member: activated (its grain started here), ready (its connection is
// up, from the local Supervisor's events), released (its grain stopped
// and the local Supervisor no longer holds it).
const (
	MemberActivated MemberEventType = "activated"
	MemberReady     MemberEventType = "ready"
	MemberReleased  MemberEventType = "released"
	// MemberFenced (Server empty): the cluster removed this member (it
	// was cut off) and the member released every server (Member.Fenced).
	MemberFenced MemberEventType = "fenced"
)

// MemberEvent is one thing a member did with a server
// (Options.OnMemberEvent). Tests count activations from these (not from
// the cluster's view); a host may log them.
type MemberEvent struct {
	Type   MemberEventType `json:"type"`
	Server string          `json:"server"`
	// Member is the member's id (Member.ID).
	Member string    `json:"member"`
	Time   time.Time `json:"time"`
}
