package mcpvisor

import (
	"encoding/json"
	"time"
)

// PollSpec says what a polling subscription polls: a tool call (Tool, a
// pool name, with Args) or a resource read (Server and URI), every
// Interval.
type PollSpec struct {
	Tool string          `json:"tool,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`

	Server string `json:"server,omitempty"`
	URI    string `json:"uri,omitempty"`

	// Interval between polls; zero means DefaultPollInterval, and less
	// than MinPollInterval is raised to it.
	Interval time.Duration `json:"interval,omitempty"`
}
