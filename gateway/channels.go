package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// channelCapability is Claude Code's channel extension: a client that
// declares experimental["claude/channel"] receives the servers' channel
// messages as notifications/claude/channel.
const channelCapability = "claude/channel"

// ChannelSource is implemented by a Backend that keeps channel messages
// for the gateway and relays permission requests (*mcpvisor.Supervisor
// does; the dashboard shows and answers those). New opens one inbox on it
// at once, so that the messages servers push before any client connects,
// or while no client waits, are queued for wait_for_channel_message.
// Without it the tool is not offered (push-capable clients still get
// every message as a notification).
type ChannelSource interface {
	Channels() mcpvisor.Channels
}

// The gateway's own tool for clients without push, and its bounds.
const (
	waitToolName = "wait_for_channel_message"
	// DefaultWaitTimeout is how long wait_for_channel_message waits when
	// the call does not say; MaxWaitTimeout is the longest it waits.
	DefaultWaitTimeout = 300 * time.Second
	MaxWaitTimeout     = 600 * time.Second
	// maxWaitMessages caps max_messages.
	maxWaitMessages = 1000
)

// The statuses of a wait_for_channel_message result.
const (
	waitReceived = "message_received"
	waitTimeout  = "timeout"
)

var waitTool = protocol.Tool{
	Name:  waitToolName,
	Title: "Wait for a channel message",
	Description: "Returns the oldest channel message (notifications/claude/channel) that a server behind the mcpvisor gateway " +
		"pushed and nobody has taken yet, or waits for the next one. Messages are queued while nobody waits (up to a bound " +
		"per server; the number dropped beyond it is reported as dropped). Arguments: timeout_seconds (default 300, at most 600), " +
		"server (only that server's messages), contains (only messages whose content contains this text), max_messages " +
		"(return up to this many queued messages at once, default 1). One call may wait at a time per session. " +
		"Result: {status: message_received|timeout, message, messages, waited_seconds, dropped, queued}.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"timeout_seconds":{"type":"number","minimum":0,"maximum":600,"default":300},` +
		`"server":{"type":"string"},"contains":{"type":"string"},` +
		`"max_messages":{"type":"integer","minimum":1,"maximum":1000,"default":1},` +
		`"timeoutMs":{"type":"integer","minimum":0,"maximum":600000,"description":"timeout in milliseconds (older name; timeout_seconds wins)"}}}`),
}

// waitArgs are wait_for_channel_message's arguments, checked.
type waitArgs struct {
	timeout  time.Duration
	server   string
	contains string
	max      int
}

// parseWaitArgs reads and checks wait_for_channel_message's arguments.
func parseWaitArgs(args json.RawMessage) (waitArgs, *protocol.Error) {
	var a struct {
		TimeoutSeconds *float64 `json:"timeout_seconds"`
		TimeoutMs      *int64   `json:"timeoutMs"`
		Server         string   `json:"server"`
		Contains       string   `json:"contains"`
		MaxMessages    *int     `json:"max_messages"`
	}
	if len(args) > 0 && string(args) != "null" && json.Unmarshal(args, &a) != nil {
		return waitArgs{}, errorf(protocol.CodeInvalidParams,
			"%s: want {timeout_seconds, server, contains, max_messages}", waitToolName)
	}
	w := waitArgs{timeout: DefaultWaitTimeout, server: a.Server, contains: a.Contains, max: 1}
	switch {
	case a.TimeoutSeconds != nil:
		if math.IsNaN(*a.TimeoutSeconds) || *a.TimeoutSeconds < 0 {
			return waitArgs{}, errorf(protocol.CodeInvalidParams, "%s: timeout_seconds must be a number from 0 to %d", waitToolName, int(MaxWaitTimeout.Seconds()))
		}
		w.timeout = time.Duration(math.Min(*a.TimeoutSeconds, MaxWaitTimeout.Seconds()) * float64(time.Second))
	case a.TimeoutMs != nil:
		w.timeout = time.Duration(max(*a.TimeoutMs, 0)) * time.Millisecond
	}
	w.timeout = min(w.timeout, MaxWaitTimeout)
	if a.MaxMessages != nil {
		if *a.MaxMessages < 1 {
			return waitArgs{}, errorf(protocol.CodeInvalidParams, "%s: max_messages must be at least 1", waitToolName)
		}
		w.max = min(*a.MaxMessages, maxWaitMessages)
	}
	return w, nil
}

// filter returns the channel filter of the arguments.
func (w waitArgs) filter() channels.Filter {
	if w.server == "" && w.contains == "" {
		return nil
	}
	return func(m channels.Message) bool {
		return (w.server == "" || w.server == m.Server) && (w.contains == "" || strings.Contains(m.Content, w.contains))
	}
}

// waitResult is the structured result of wait_for_channel_message.
type waitResult struct {
	// Status is message_received or timeout.
	Status string `json:"status"`
	// Message is the oldest message taken (null on timeout).
	Message *channels.Message `json:"message"`
	// Messages are every message taken, oldest first (Message first);
	// more than one only with max_messages.
	Messages []channels.Message `json:"messages"`
	// WaitedSeconds is how long the call waited.
	WaitedSeconds float64 `json:"waited_seconds"`
	// Dropped sums the messages' Dropped: messages of their servers that
	// were dropped, the queue being full, since the last delivery.
	Dropped uint64 `json:"dropped"`
	// Queued is how many messages the gateway still holds.
	Queued int `json:"queued"`
}

// errDraining ends the waits when the gateway drains.
var errDraining = errors.New("mcpvisor gateway is shutting down")

// CodeWaitInProgress: another wait_for_channel_message call of the same
// session is still waiting (one at a time per session).
const CodeWaitInProgress = -32053

// forwardChannel delivers a server's channel message to the sessions that
// declared the channel capability and whose callers may use the server.
// (The gateway's inbox has it already,
// for wait_for_channel_message: see ChannelSource.)
func (fo *fanout) forwardChannel(ev *mcpvisor.ChannelMessageEvent) {
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
	mayUse := fo.audience(ev.Server)
	fo.srv.NotifySessions(protocol.NotificationChannel, p, func(s *mcpserver.Session) bool {
		_, wants := s.Client().Capabilities.Experimental[channelCapability]
		return wants && (mayUse == nil || mayUse(s, nil))
	})
}

// channelWaits are the gateway's queue of channel messages (the inbox)
// and the wait_for_channel_message calls waiting on it, one at most per
// session.
//
// Concurrency: safe for concurrent use; mu guards waits. The inbox has
// its own lock; it is nil without a ChannelSource, and closes with the
// gateway.
type channelWaits struct {
	inbox    *channels.Inbox
	capacity int          // Options.ChannelQueue
	draining *atomic.Bool // the gateway's: set, no new wait starts

	mu    sync.Mutex
	waits map[*mcpserver.Session]context.CancelCauseFunc // one per session; guarded by mu
	// only narrows a wait's filter to the servers its caller may use
	// (accessView.channelFilter); set by New.
	only func(ctx context.Context, f channels.Filter) channels.Filter
}

// count returns the number of calls waiting.
func (cw *channelWaits) count() int {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return len(cw.waits)
}

// wait serves wait_for_channel_message for session s: the oldest queued
// messages the arguments select, at once, or the next one to arrive
// within the timeout.
func (cw *channelWaits) wait(ctx context.Context, s *mcpserver.Session, args json.RawMessage) (any, *protocol.Error) {
	a, perr := parseWaitArgs(args)
	if perr != nil {
		return nil, perr
	}
	if cw.inbox == nil {
		return nil, errorf(protocol.CodeInvalidParams, "unknown tool %q", waitToolName)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cw.mu.Lock()
	if _, busy := cw.waits[s]; busy {
		cw.mu.Unlock()
		return nil, errorf(CodeWaitInProgress, "%s: another call of this session is already waiting; one waits at a time per session", waitToolName)
	}
	cw.waits[s] = cancel
	cw.mu.Unlock()
	defer func() {
		cw.mu.Lock()
		delete(cw.waits, s)
		cw.mu.Unlock()
	}()
	if cw.draining.Load() {
		return nil, errorf(CodeShuttingDown, "%v", errDraining)
	}

	start := time.Now()
	wctx, stop := context.WithTimeout(ctx, a.timeout)
	msgs, err := cw.inbox.WaitN(wctx, cw.only(ctx, a.filter()), a.max)
	stop()
	res := waitResult{Status: waitReceived, Messages: msgs, WaitedSeconds: time.Since(start).Seconds()}
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errDraining):
		return nil, errorf(CodeShuttingDown, "%v", errDraining)
	case ctx.Err() != nil:
		return nil, rpcError(ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		res.Status = waitTimeout
	default: // the inbox closed: the supervisor is shutting down
		return nil, errorf(CodeShuttingDown, "%v", errDraining)
	}
	res.Queued = cw.inbox.Stats().Queued
	if res.Messages == nil {
		res.Messages = []channels.Message{}
	}
	var text strings.Builder
	if len(res.Messages) == 0 {
		fmt.Fprintf(&text, "no channel message within %v", a.timeout)
	} else {
		res.Message = &res.Messages[0]
	}
	for i, m := range res.Messages {
		res.Dropped += m.Dropped
		if i > 0 {
			text.WriteByte('\n')
		}
		if m.Dropped > 0 {
			fmt.Fprintf(&text, "[%d earlier messages from %s were dropped: the queue was full]\n", m.Dropped, m.Server)
		}
		text.WriteString(channels.Render(m))
	}
	structured, _ := json.Marshal(res)
	return &protocol.CallToolResult{
		Content:           []protocol.Content{protocol.TextContent(text.String())},
		StructuredContent: structured,
	}, nil
}

// endAll ends every wait_for_channel_message call (Drain).
func (cw *channelWaits) endAll() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for _, cancel := range cw.waits {
		cancel(errDraining)
	}
}

// ChannelReport is the channel queue in a StatusReport: what the gateway
// holds for wait_for_channel_message.
type ChannelReport struct {
	// Capacity is how many messages are kept per server.
	Capacity int `json:"capacity"`
	channels.Stats
	// Servers breaks the counts down by server.
	Servers []channels.ServerStats `json:"servers"`
}

// report returns the channel queue's report, or nil without one.
func (cw *channelWaits) report() *ChannelReport {
	if cw.inbox == nil {
		return nil
	}
	return &ChannelReport{Capacity: cw.capacity, Stats: cw.inbox.Stats(), Servers: cw.inbox.ServerStats()}
}
