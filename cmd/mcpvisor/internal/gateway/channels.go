package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// channelCapability is Claude Code's channel extension: a client that
// declares experimental["claude/channel"] receives the servers' channel
// messages as notifications/claude/channel.
const channelCapability = "claude/channel"

// waitToolName is the gateway's own tool for clients without push: it
// blocks until a server sends a channel message.
const waitToolName = "wait_for_channel_message"

var waitTool = protocol.Tool{
	Name:  waitToolName,
	Title: "Wait for a channel message",
	Description: "Blocks until a server behind the mcpvisor gateway pushes a channel message " +
		"(notifications/claude/channel), and returns it. Arguments: timeoutMs (default 30000, at most 600000), " +
		"server (only messages of that server), contains (only messages whose content contains this text).",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"timeoutMs":{"type":"integer","minimum":0,"maximum":600000},` +
		`"server":{"type":"string"},"contains":{"type":"string"}}}`),
}

// waiter is one wait_for_channel_message call.
type waiter struct {
	server, contains string
	got              chan channelMessage // buffered 1
	cancel           chan struct{}       // closed by Drain
}

type channelMessage struct {
	Server  string          `json:"server"`
	Content string          `json:"content"`
	Meta    json.RawMessage `json:"meta,omitempty"`
}

func (w *waiter) matches(m channelMessage) bool {
	return (w.server == "" || w.server == m.Server) && (w.contains == "" || strings.Contains(m.Content, w.contains))
}

// forwardChannel delivers a server's channel message to the sessions that
// declared the channel capability and to the matching waiters.
func (g *Gateway) forwardChannel(ev mcpvisor.Event) {
	var p struct {
		Content string                     `json:"content"`
		Meta    map[string]json.RawMessage `json:"meta,omitempty"`
	}
	if json.Unmarshal(ev.Data, &p) != nil {
		return
	}
	if p.Meta == nil {
		p.Meta = map[string]json.RawMessage{}
	}
	if _, ok := p.Meta["server"]; !ok {
		p.Meta["server"], _ = json.Marshal(ev.Server)
	}
	for _, s := range g.sessionsSnapshot() {
		s.mu.Lock()
		_, wants := s.caps.Experimental[channelCapability]
		s.mu.Unlock()
		if wants && s.ready() {
			s.notify(protocol.NotificationChannel, p)
		}
	}
	meta, _ := json.Marshal(p.Meta)
	msg := channelMessage{Server: ev.Server, Content: p.Content, Meta: meta}
	g.mu.Lock()
	for w := range g.waiters {
		if w.matches(msg) {
			select {
			case w.got <- msg:
			default:
			}
			delete(g.waiters, w)
		}
	}
	g.mu.Unlock()
}

// waitForChannel serves wait_for_channel_message: the next matching
// channel message, or a result saying none came within the timeout.
func (g *Gateway) waitForChannel(ctx context.Context, args json.RawMessage) (any, *protocol.Error) {
	var a struct {
		TimeoutMs *int64 `json:"timeoutMs"`
		Server    string `json:"server"`
		Contains  string `json:"contains"`
	}
	if len(args) > 0 && json.Unmarshal(args, &a) != nil {
		return nil, errorf(protocol.CodeInvalidParams, "%s: want {timeoutMs, server, contains}", waitToolName)
	}
	timeout := 30 * time.Second
	if a.TimeoutMs != nil {
		timeout = time.Duration(min(max(*a.TimeoutMs, 0), 600000)) * time.Millisecond
	}
	w := &waiter{server: a.Server, contains: a.Contains, got: make(chan channelMessage, 1), cancel: make(chan struct{})}
	g.mu.Lock()
	g.waiters[w] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiters, w)
		g.mu.Unlock()
	}()
	if g.draining.Load() {
		return nil, errorf(CodeShuttingDown, "mcpvisor gateway is shutting down")
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-w.got:
		structured, _ := json.Marshal(m)
		return &protocol.CallToolResult{
			Content:           []protocol.Content{protocol.TextContent(m.Content)},
			StructuredContent: structured,
		}, nil
	case <-t.C:
		return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("no channel message within " + timeout.String())}}, nil
	case <-w.cancel:
		return nil, errorf(CodeShuttingDown, "mcpvisor gateway is shutting down")
	case <-ctx.Done():
		return nil, rpcError(ctx.Err())
	}
}
