package mockserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The extension features (Options.Channel, Options.Subscribe,
// Options.Progress): a channel server that pushes bursts and echoes the
// permission relay, resource subscriptions, and progress reports.

// extensions is the server's part that serves the extension features.
// o, srv and later are set by newServer and never change; mu guards
// version and cancelled; startPushed is an atomic.
type extensions struct {
	o     *Options
	srv   *mcpserver.Server // the server's, for its broadcasts
	later func(f func())    // an answer given later (server.later)

	mu        sync.Mutex
	version   map[string]int // per URI, bumped by touch
	cancelled int            // notifications/cancelled received
	// startPushed is set once the ChannelAtStart messages are out.
	startPushed atomic.Bool
}

func (e *extensions) capabilities(c *protocol.ServerCapabilities) {
	if e.o.Channel {
		c.Experimental = map[string]json.RawMessage{"claude/channel": json.RawMessage(`{}`), "claude/channel/permission": json.RawMessage(`{}`)}
	}
	if e.o.Subscribe {
		if c.Resources == nil {
			c.Resources = &protocol.ResourcesCapability{}
		}
		c.Resources.Subscribe = true
	}
}

func (e *extensions) tools() []protocol.Tool {
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	var tools []protocol.Tool
	if e.o.Channel {
		tools = append(tools, protocol.Tool{Name: "channel_burst", Description: "Pushes n channel messages (content <prefix><i>, meta {i}).",
			InputSchema: obj(`"n":{"type":"integer"},"prefix":{"type":"string"}`)})
	}
	if e.o.Subscribe {
		tools = append(tools, protocol.Tool{Name: "touch", Description: "Changes resource uri and sends resources/updated if it is subscribed (resources/subscribe, or a subscriptions/listen stream's resourceSubscriptions).",
			InputSchema: obj(`"uri":{"type":"string"}`)})
	}
	if e.o.Progress {
		tools = append(tools, protocol.Tool{Name: "progress", Description: "Reports steps progress notifications ms apart, then answers.",
			InputSchema: obj(`"steps":{"type":"integer"},"ms":{"type":"integer"}`)})
		tools = append(tools, protocol.Tool{Name: "cancelled", Description: "Answers how many notifications/cancelled it received.", InputSchema: obj(``)})
	}
	return tools
}

// extNotification handles a notification from the client.
func (e *extensions) notification(method string, params json.RawMessage) {
	switch {
	case method == protocol.NotificationCancelled:
		e.mu.Lock()
		e.cancelled++
		e.mu.Unlock()
	case e.o.Channel && method == protocol.NotificationChannelPermissionRequest:
		// Echo the prompt as a channel message, as a chat bridge would
		// show it to its user.
		var p struct {
			RequestID string `json:"request_id"`
			ToolName  string `json:"tool_name"`
		}
		_ = json.Unmarshal(params, &p)
		e.channelMessage("approve "+p.ToolName+"? reply yes "+p.RequestID, map[string]string{"kind": "permission_request", "request_id": p.RequestID, "tool_name": p.ToolName})
	case e.o.Channel && method == protocol.NotificationChannelPermission:
		var p struct {
			RequestID string `json:"request_id"`
			Behavior  string `json:"behavior"`
		}
		_ = json.Unmarshal(params, &p)
		e.channelMessage("verdict "+p.RequestID+" "+p.Behavior, map[string]string{"kind": "verdict", "request_id": p.RequestID, "behavior": p.Behavior})
	}
}

// channelAtStart pushes Options.ChannelAtStart channel messages, once,
// after the first tools/list has been answered.
func (e *extensions) channelAtStart(sess *mcpserver.Session) {
	if !e.o.Channel || e.o.ChannelAtStart <= 0 || !e.startPushed.CompareAndSwap(false, true) {
		return
	}
	sess.Flush() // the answer to tools/list goes first
	for i := 1; i <= e.o.ChannelAtStart; i++ {
		e.channelMessage("start"+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)})
	}
}

func (e *extensions) channelMessage(content string, meta map[string]string) {
	e.srv.Broadcast(protocol.NotificationChannel, map[string]any{"content": content, "meta": meta})
}

// extRequest answers the extension requests (resources/subscribe and
// unsubscribe, with Subscribe: the session records them); it reports
// whether r was one.
func (e *extensions) request(w mcpserver.ResponseWriter, r *mcpserver.Request) bool {
	if !e.o.Subscribe || (r.Method != protocol.MethodResourcesSubscribe && r.Method != protocol.MethodResourcesUnsubscribe) {
		return false
	}
	var p protocol.SubscribeParams
	_ = json.Unmarshal(r.Params, &p)
	if r.Method == protocol.MethodResourcesSubscribe {
		if !strings.HasPrefix(p.URI, "mock://") {
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "no resource %q", p.URI))
			return true
		}
		r.Session.Subscribe(p.URI)
	} else {
		r.Session.Unsubscribe(p.URI)
	}
	w.Reply(json.RawMessage(`{}`))
	return true
}

// versionSuffix tells how many times uri was touched, if ever.
func (e *extensions) versionSuffix(uri string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := e.version[uri]; n > 0 {
		return " v" + strconv.Itoa(n)
	}
	return ""
}

// extTool runs the extension tools; it reports whether name was one.
func (e *extensions) tool(w mcpserver.ResponseWriter, r *mcpserver.Request, name string) bool {
	var call struct {
		Arguments struct {
			N      int    `json:"n"`
			Prefix string `json:"prefix"`
			URI    string `json:"uri"`
			Steps  int    `json:"steps"`
			Ms     int    `json:"ms"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(r.Params, &call)
	a := call.Arguments
	text := func(t string) protocol.CallToolResult {
		return protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(t)}}
	}
	switch {
	case e.o.Channel && name == "channel_burst":
		for i := 1; i <= a.N; i++ {
			e.channelMessage(a.Prefix+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)})
		}
		w.Reply(text(fmt.Sprintf("pushed %d", a.N)))
	case e.o.Subscribe && name == "touch":
		e.mu.Lock()
		if e.version == nil {
			e.version = map[string]int{}
		}
		e.version[a.URI]++
		e.mu.Unlock()
		sub := e.srv.ResourceUpdated(a.URI) > 0
		w.Reply(text(fmt.Sprintf("touched %s (subscribed: %v)", a.URI, sub)))
	case e.o.Progress && name == "progress":
		var p struct {
			Meta protocol.Meta `json:"_meta"`
		}
		_ = json.Unmarshal(r.Params, &p)
		token := p.Meta["progressToken"]
		e.later(func() {
			for i := 1; i <= a.Steps; i++ {
				if token != nil {
					total := float64(a.Steps)
					w.Notify(protocol.NotificationProgress, protocol.ProgressParams{ProgressToken: token, Progress: float64(i), Total: &total, Message: fmt.Sprintf("step %d", i)})
				}
				time.Sleep(time.Duration(a.Ms) * time.Millisecond)
			}
			w.Reply(text(fmt.Sprintf("done after %d steps", a.Steps)))
		})
	case e.o.Progress && name == "cancelled":
		e.mu.Lock()
		n := e.cancelled
		e.mu.Unlock()
		w.Reply(text(strconv.Itoa(n)))
	default:
		return false
	}
	return true
}

// agreedFilter is the part of a subscriptions/listen filter the mock
// honours (mcpserver.Options.Subscriptions): its tools change (and with
// the conformance fixtures, its prompts), and with Subscribe it sends
// resources/updated for its own resources (mock://…; other URIs are
// refused, left out of the acknowledgement); the conformance fixtures
// agree to every URI.
func (e *extensions) agreedFilter(_ context.Context, _ *mcpserver.Request, want protocol.NotificationSubscriptions) (protocol.NotificationSubscriptions, func()) {
	agreed := protocol.NotificationSubscriptions{ToolsListChanged: want.ToolsListChanged, PromptsListChanged: e.o.Conformance && want.PromptsListChanged}
	for _, u := range want.ResourceSubscriptions {
		if e.o.Conformance || (e.o.Subscribe && strings.HasPrefix(u, "mock://")) {
			agreed.ResourceSubscriptions = append(agreed.ResourceSubscriptions, u)
		}
	}
	return agreed, nil
}
