package management

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// The polling tools: SubscribePolling and UnsubscribePolling.

// pollingArgs is SubscribePolling's input.
type pollingArgs struct {
	Type       string          `json:"type"`
	Server     string          `json:"server"`
	ToolName   string          `json:"toolName"`
	Arguments  json.RawMessage `json:"arguments"`
	URI        string          `json:"uri"`
	IntervalMs *float64        `json:"intervalMs"`
	Reason     string          `json:"reason"`
}

// spec checks the arguments and turns them into a mcpvisor.PollSpec. A tool is
// named as its server names it (toolName), or by its qualified name.
func (a pollingArgs) spec(s *mcpvisor.Supervisor) (mcpvisor.PollSpec, error) {
	if err := required("server", a.Server); err != nil {
		return mcpvisor.PollSpec{}, err
	}
	interval := mcpvisor.DefaultPollInterval
	if a.IntervalMs != nil {
		if *a.IntervalMs < 0 || math.IsNaN(*a.IntervalMs) || *a.IntervalMs > float64(24*time.Hour/time.Millisecond) {
			return mcpvisor.PollSpec{}, fmt.Errorf("intervalMs %v is out of range", *a.IntervalMs)
		}
		interval = max(time.Duration(*a.IntervalMs)*time.Millisecond, mcpvisor.MinPollInterval)
	}
	switch a.Type {
	case "tool":
		if err := required("toolName", a.ToolName); err != nil {
			return mcpvisor.PollSpec{}, err
		}
		name, ok := qualifiedToolName(s, a.Server, a.ToolName)
		if !ok {
			return mcpvisor.PollSpec{}, fmt.Errorf("%w: server %q offers no tool %q", mcpvisor.ErrUnknownTool, a.Server, a.ToolName)
		}
		return mcpvisor.PollSpec{Tool: name, Args: a.Arguments, Interval: interval}, nil
	case "resource":
		if err := required("uri", a.URI); err != nil {
			return mcpvisor.PollSpec{}, err
		}
		return mcpvisor.PollSpec{Server: a.Server, URI: a.URI, Interval: interval}, nil
	}
	return mcpvisor.PollSpec{}, fmt.Errorf(`argument "type" must be "tool" or "resource", not %q`, a.Type)
}

// qualifiedToolName finds the pool's name of server's tool: toolName as
// the server names it, or already qualified.
func qualifiedToolName(s *mcpvisor.Supervisor, server, toolName string) (string, bool) {
	for _, t := range s.Tools() {
		if t.Server == server && (t.Definition.Name == toolName || t.Name == toolName) {
			return t.Name, true
		}
	}
	return "", false
}

func subscribePollingTool(_ context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a pollingArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	spec, err := a.spec(s)
	if err != nil {
		return nil, err
	}
	id, err := s.Polling().Subscribe(spec)
	if err != nil {
		return nil, err
	}
	return subscribeOutput{Subscribed: true, SubscriptionID: id}, nil
}

// unpollArgs is UnsubscribePolling's input.
type unpollArgs struct {
	SubscriptionID string `json:"subscriptionId"`
	Server         string `json:"server"`
	Target         string `json:"target"`
}

// unsubscribePollingTool stops the poll named by subscriptionId, or every
// poll of server (of target only, a tool or resource URI, when given).
// Nothing to stop is {unsubscribed: false}.
func unsubscribePollingTool(_ context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a unpollArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.SubscriptionID == "" && a.Server == "" {
		return nil, fmt.Errorf("give subscriptionId, or server (and target)")
	}
	stopped := false
	for id, spec := range s.Polling().List() {
		if !a.matches(s, id, spec) {
			continue
		}
		if err := s.Polling().Unsubscribe(id); err != nil {
			continue // stopped meanwhile
		}
		stopped = true
	}
	return unsubscribeOutput{Unsubscribed: stopped}, nil
}

// matches reports whether poll id (spec) is one a names.
func (a unpollArgs) matches(s *mcpvisor.Supervisor, id string, spec mcpvisor.PollSpec) bool {
	if a.SubscriptionID != "" && id != a.SubscriptionID {
		return false
	}
	switch {
	case a.Server == "":
		return true
	case spec.Tool == "":
		return spec.Server == a.Server && (a.Target == "" || a.Target == spec.URI)
	}
	for _, t := range s.Tools() {
		if t.Name == spec.Tool {
			return t.Server == a.Server && (a.Target == "" || a.Target == t.Definition.Name || a.Target == t.Name)
		}
	}
	// The tool is out of the pool (its server is down): its default name.
	if a.Target != "" {
		return spec.Tool == mcpvisor.QualifiedName(a.Server, a.Target) || spec.Tool == a.Target
	}
	return strings.HasPrefix(spec.Tool, "mcp__"+a.Server+"__")
}
