package mockserver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The extension features (Options.Channel, Options.Subscribe,
// Options.Progress): a channel server that pushes bursts and echoes the
// permission relay, resource subscriptions, and progress reports. Served
// over the connection transports (stdio, WebSocket).

// extState is what the extension features remember. mu guards it.
type extState struct {
	mu         sync.Mutex
	subscribed map[string]bool // resources/subscribe'd URIs
	version    map[string]int  // per URI, bumped by touch
	cancelled  int             // notifications/cancelled received
	// startPushed is set once the ChannelAtStart messages are out.
	startPushed atomic.Bool
}

func (s *server) extCapabilities(c *protocol.ServerCapabilities) {
	if s.o.Channel {
		c.Experimental = map[string]json.RawMessage{"claude/channel": json.RawMessage(`{}`), "claude/channel/permission": json.RawMessage(`{}`)}
	}
	if s.o.Subscribe {
		if c.Resources == nil {
			c.Resources = &protocol.ResourcesCapability{}
		}
		c.Resources.Subscribe = true
	}
}

func (s *server) extTools() []protocol.Tool {
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	var tools []protocol.Tool
	if s.o.Channel {
		tools = append(tools, protocol.Tool{Name: "channel_burst", Description: "Pushes n channel messages (content <prefix><i>, meta {i}).",
			InputSchema: obj(`"n":{"type":"integer"},"prefix":{"type":"string"}`)})
	}
	if s.o.Subscribe {
		tools = append(tools, protocol.Tool{Name: "touch", Description: "Changes resource uri and sends resources/updated if it is subscribed (resources/subscribe, or a subscriptions/listen stream's resourceSubscriptions).",
			InputSchema: obj(`"uri":{"type":"string"}`)})
	}
	if s.o.Progress {
		tools = append(tools, protocol.Tool{Name: "progress", Description: "Reports steps progress notifications ms apart, then answers.",
			InputSchema: obj(`"steps":{"type":"integer"},"ms":{"type":"integer"}`)})
		tools = append(tools, protocol.Tool{Name: "cancelled", Description: "Answers how many notifications/cancelled it received.", InputSchema: obj(``)})
	}
	return tools
}

// extNotification handles a notification from the client.
func (s *server) extNotification(m *protocol.Message) {
	switch {
	case m.Method == protocol.NotificationCancelled:
		s.ext.mu.Lock()
		s.ext.cancelled++
		s.ext.mu.Unlock()
	case s.o.Channel && m.Method == protocol.NotificationChannelPermissionRequest:
		// Echo the prompt as a channel message, as a chat bridge would
		// show it to its user.
		var p struct {
			RequestID string `json:"request_id"`
			ToolName  string `json:"tool_name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.channelMessage("approve "+p.ToolName+"? reply yes "+p.RequestID, map[string]string{"kind": "permission_request", "request_id": p.RequestID, "tool_name": p.ToolName})
	case s.o.Channel && m.Method == protocol.NotificationChannelPermission:
		var p struct {
			RequestID string `json:"request_id"`
			Behavior  string `json:"behavior"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.channelMessage("verdict "+p.RequestID+" "+p.Behavior, map[string]string{"kind": "verdict", "request_id": p.RequestID, "behavior": p.Behavior})
	}
}

// channelAtStart pushes Options.ChannelAtStart channel messages, once,
// after the first tools/list has been answered.
func (s *server) channelAtStart(out output) {
	if !s.o.Channel || s.o.ChannelAtStart <= 0 || !s.ext.startPushed.CompareAndSwap(false, true) {
		return
	}
	flushHeld(out) // the answer to tools/list goes first
	for i := 1; i <= s.o.ChannelAtStart; i++ {
		s.channelMessage("start"+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)})
	}
}

func (s *server) channelMessage(content string, meta map[string]string) {
	params, _ := json.Marshal(map[string]any{"content": content, "meta": meta})
	s.hub.broadcast(protocol.NotificationChannel, params)
}

// extRequest answers the extension requests; it reports whether m was one.
func (s *server) extRequest(out output, m *protocol.Message) bool {
	if !s.o.Subscribe || (m.Method != protocol.MethodResourcesSubscribe && m.Method != protocol.MethodResourcesUnsubscribe) {
		return false
	}
	var p protocol.SubscribeParams
	_ = json.Unmarshal(m.Params, &p)
	if m.Method == protocol.MethodResourcesSubscribe && !strings.HasPrefix(p.URI, "mock://") {
		s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidParams, "no resource %q", p.URI))
		return true
	}
	s.ext.mu.Lock()
	if s.ext.subscribed == nil {
		s.ext.subscribed = map[string]bool{}
	}
	if m.Method == protocol.MethodResourcesSubscribe {
		s.ext.subscribed[p.URI] = true
	} else {
		delete(s.ext.subscribed, p.URI)
	}
	s.ext.mu.Unlock()
	s.reply(out, m.ID, json.RawMessage(`{}`))
	return true
}

// versionSuffix tells how many times uri was touched, if ever.
func (s *server) versionSuffix(uri string) string {
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	if n := s.ext.version[uri]; n > 0 {
		return " v" + strconv.Itoa(n)
	}
	return ""
}

// extTool runs the extension tools; it reports whether name was one.
func (s *server) extTool(out output, m *protocol.Message, name string) bool {
	var call struct {
		Arguments struct {
			N      int    `json:"n"`
			Prefix string `json:"prefix"`
			URI    string `json:"uri"`
			Steps  int    `json:"steps"`
			Ms     int    `json:"ms"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &call)
	a := call.Arguments
	text := func(t string) protocol.CallToolResult {
		return protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(t)}}
	}
	switch {
	case s.o.Channel && name == "channel_burst":
		for i := 1; i <= a.N; i++ {
			s.channelMessage(a.Prefix+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)})
		}
		s.reply(out, m.ID, text(fmt.Sprintf("pushed %d", a.N)))
	case s.o.Subscribe && name == "touch":
		s.ext.mu.Lock()
		if s.ext.version == nil {
			s.ext.version = map[string]int{}
		}
		s.ext.version[a.URI]++
		sub := s.ext.subscribed[a.URI]
		s.ext.mu.Unlock()
		sub = s.hub.resourceUpdated(a.URI, sub)
		s.reply(out, m.ID, text(fmt.Sprintf("touched %s (subscribed: %v)", a.URI, sub)))
	case s.o.Progress && name == "progress":
		var p struct {
			Meta protocol.Meta `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		token := p.Meta["progressToken"]
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for i := 1; i <= a.Steps; i++ {
				if token != nil {
					total := float64(a.Steps)
					params, _ := json.Marshal(protocol.ProgressParams{ProgressToken: token, Progress: float64(i), Total: &total, Message: fmt.Sprintf("step %d", i)})
					s.hub.broadcast(protocol.NotificationProgress, params)
				}
				time.Sleep(time.Duration(a.Ms) * time.Millisecond)
			}
			s.reply(out, m.ID, text(fmt.Sprintf("done after %d steps", a.Steps)))
		}()
	case s.o.Progress && name == "cancelled":
		s.ext.mu.Lock()
		n := s.ext.cancelled
		s.ext.mu.Unlock()
		s.reply(out, m.ID, text(strconv.Itoa(n)))
	default:
		return false
	}
	return true
}
