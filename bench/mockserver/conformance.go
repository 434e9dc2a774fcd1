package mockserver

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The fixtures of the conformance suite's server scenarios
// (@modelcontextprotocol/conformance `server`), served with
// Options.Conformance (-conformance): the tools, resources and prompts
// the scenarios call by name, progress reports, completions, and the
// tools that ask the client (sampling, elicitation; on the connection
// transports: stdio and WebSocket, whose client's answers come back on
// the same connection).

// tinyPNG is a 1×1 transparent PNG; tinyWAV a 44-byte silent WAV header.
const (
	tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	tinyWAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
)

// reconnectionDelay is how long test_reconnection takes to answer (the
// gateway's conformance run ends POST streams after 500 ms).
const reconnectionDelay = 1500 * time.Millisecond

func conformanceTools() []protocol.Tool {
	obj := json.RawMessage(`{"type":"object","properties":{}}`)
	t := func(name, desc string) protocol.Tool {
		return protocol.Tool{Name: name, Description: desc, InputSchema: obj}
	}
	return []protocol.Tool{
		t("test_simple_text", "Returns simple text content."),
		t("test_image_content", "Returns image content."),
		t("test_audio_content", "Returns audio content."),
		t("test_embedded_resource", "Returns an embedded resource."),
		t("test_multiple_content_types", "Returns text, image and resource content."),
		t("test_tool_with_logging", "Sends three log messages, then returns."),
		t("test_error_handling", "Always fails with isError."),
		t("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100, 50 ms apart, then returns."),
		t("test_reconnection", "Answers after 1.5 s: long enough for a gateway to end the POST stream for SSE polling (SEP-1699)."),
		{Name: "test_sampling", Description: "Asks the client to sample a message for prompt.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)},
		{Name: "test_elicitation", Description: "Asks the user (elicitation) for a username and an email.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
		t("test_elicitation_sep1034_defaults", "Elicits a form whose fields all have defaults (SEP-1034)."),
		t("test_elicitation_sep1330_enums", "Elicits a form with every enum variant (SEP-1330)."),
	}
}

// The schemas of the elicitation fixtures.
const (
	sep1034Schema = `{"type":"object","properties":{` +
		`"name":{"type":"string","default":"John Doe"},` +
		`"age":{"type":"integer","default":30},` +
		`"score":{"type":"number","default":95.5},` +
		`"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},` +
		`"verified":{"type":"boolean","default":true}}}`
	sep1330Schema = `{"type":"object","properties":{` +
		`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},` +
		`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},` +
		`"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},` +
		`"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},` +
		`"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`
	userSchema = `{"type":"object","properties":{"username":{"type":"string","description":"User's response"},` +
		`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`
)

// askTimeout bounds the wait of a fixture for its client's answer.
const askTimeout = 30 * time.Second

// conformanceAsync runs the fixtures that wait (on the client, or on
// timers) in a goroutine of their own, since the connection's reader
// must go on reading the client's answers; it reports false for other
// tools.
func (s *server) conformanceAsync(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request, name string) bool {
	var p struct {
		Arguments struct {
			Prompt  string `json:"prompt"`
			Message string `json:"message"`
		} `json:"arguments"`
		Meta protocol.Meta `json:"_meta"`
	}
	_ = json.Unmarshal(r.Params, &p)
	text := func(t string) protocol.CallToolResult {
		return protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(t)}}
	}
	ask := func(method string, params any) (json.RawMessage, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
		defer cancel()
		return w.Ask(ctx, method, params)
	}
	elicit := func(message, schema string) {
		ans, err := ask(protocol.MethodElicitationCreate, map[string]any{
			"mode": "form", "message": message, "requestedSchema": json.RawMessage(schema)})
		if err != nil {
			w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("elicitation failed: " + err.Error())}})
			return
		}
		var res struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(ans, &res)
		if res.Content == nil {
			res.Content = json.RawMessage(`{}`)
		}
		w.Reply(text("Elicitation completed: action=" + res.Action + ", content=" + string(res.Content)))
	}
	var run func()
	switch name {
	case "test_reconnection":
		run = func() {
			time.Sleep(reconnectionDelay)
			w.Reply(text("Reconnection test completed"))
		}
	case "test_tool_with_progress":
		token := p.Meta[protocol.MetaProgressToken]
		run = func() {
			total := 100.0
			for i, v := range []float64{0, 50, 100} {
				if i > 0 {
					time.Sleep(50 * time.Millisecond)
				}
				if token != nil {
					w.Notify(protocol.NotificationProgress, protocol.ProgressParams{ProgressToken: token, Progress: v, Total: &total})
				}
			}
			w.Reply(text("Progress tool completed"))
		}
	case "test_sampling":
		run = func() {
			ans, err := ask(protocol.MethodSamplingCreateMessage, map[string]any{
				"messages":  []any{map[string]any{"role": "user", "content": map[string]string{"type": "text", "text": p.Arguments.Prompt}}},
				"maxTokens": 100,
			})
			if err != nil {
				w.Reply(protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent("sampling failed: " + err.Error())}})
				return
			}
			var res struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			_ = json.Unmarshal(ans, &res)
			w.Reply(text("LLM response: " + res.Content.Text))
		}
	case "test_elicitation":
		run = func() { elicit(p.Arguments.Message, userSchema) }
	case "test_elicitation_sep1034_defaults":
		run = func() { elicit("Please review and update the form fields with defaults", sep1034Schema) }
	case "test_elicitation_sep1330_enums":
		run = func() { elicit("Please select options from the enum fields", sep1330Schema) }
	default:
		return false
	}
	s.later(run)
	return true
}

// conformanceComplete answers completion/complete: the values of the
// fixture prompt's arguments that start with the value typed so far.
func (s *server) conformanceComplete(w mcpserver.ResponseWriter, r *mcpserver.Request) {
	var p protocol.CompleteParams
	_ = json.Unmarshal(r.Params, &p)
	values := []string{}
	for _, v := range []string{"paris", "park", "party", "test", "testing"} {
		if strings.HasPrefix(v, p.Argument.Value) {
			values = append(values, v)
		}
	}
	total := len(values)
	w.Reply(protocol.CompleteResult{Completion: protocol.Completion{Values: values, Total: &total}})
}

var embeddedText = protocol.Content{Type: protocol.ContentResource, Resource: &protocol.ResourceContents{
	URI: "test://embedded-resource", MimeType: "text/plain", Text: "This is an embedded resource content."}}

// conformanceCall answers a fixture tool; it reports false for other
// tools.
func (s *server) conformanceCall(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request, name string) bool {
	if s.conformanceAsync(ctx, w, r, name) || s.mrtrCall(w, r, name) || s.statelessCall(w, r, name) || s.tasksCall(w, r, name) {
		return true
	}
	text := func(t string) protocol.Content { return protocol.TextContent(t) }
	image := protocol.Content{Type: protocol.ContentImage, Data: tinyPNG, MimeType: "image/png"}
	var res protocol.CallToolResult
	switch name {
	case "test_simple_text":
		res.Content = []protocol.Content{text("This is a simple text response for testing.")}
	case "test_image_content":
		res.Content = []protocol.Content{image}
	case "test_audio_content":
		res.Content = []protocol.Content{{Type: protocol.ContentAudio, Data: tinyWAV, MimeType: "audio/wav"}}
	case "test_embedded_resource":
		res.Content = []protocol.Content{embeddedText}
	case "test_multiple_content_types":
		res.Content = []protocol.Content{text("Multiple content types test:"), image, embeddedText}
	case "test_tool_with_logging":
		for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			s.srv.Broadcast(protocol.NotificationMessage, protocol.LoggingMessageParams{Level: protocol.LevelInfo, Logger: "conformance", Data: json.RawMessage(`"` + msg + `"`)})
		}
		res.Content = []protocol.Content{text("Tool with logging executed successfully")}
	case "test_error_handling":
		res.IsError, res.Content = true, []protocol.Content{text("This tool intentionally returns an error for testing")}
	default:
		return false
	}
	w.Reply(res)
	return true
}

// conformanceDispatch answers the resource and prompt requests of the
// fixtures; it reports false for anything else.
func (s *server) conformanceDispatch(_ context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) bool {
	if s.tasksDispatch(w, r) || s.skillsDispatch(w, r) {
		return true
	}
	switch r.Method {
	case protocol.MethodResourcesList:
		w.Reply(protocol.ListResourcesResult{Resources: []protocol.Resource{
			{URI: "test://static-text", Name: "static-text", MimeType: "text/plain"},
			{URI: "test://static-binary", Name: "static-binary", MimeType: "image/png"},
			{URI: "test://watched-resource", Name: "watched-resource", MimeType: "text/plain"},
			skillResources()[0], skillResources()[1],
		}})
	case protocol.MethodResourcesTemplatesList:
		w.Reply(protocol.ListResourceTemplatesResult{ResourceTemplates: []protocol.ResourceTemplate{
			{URITemplate: "test://template/{id}/data", Name: "template", MimeType: "application/json"},
		}})
	case protocol.MethodResourcesRead:
		var p protocol.ReadResourceParams
		_ = json.Unmarshal(r.Params, &p)
		var c protocol.ResourceContents
		switch {
		case p.URI == "test://static-text" || p.URI == "test://watched-resource":
			c = protocol.ResourceContents{URI: p.URI, MimeType: "text/plain", Text: "This is the content of the static text resource."}
		case p.URI == "test://static-binary":
			c = protocol.ResourceContents{URI: p.URI, MimeType: "image/png", Blob: tinyPNG}
		case strings.HasPrefix(p.URI, "test://template/") && strings.HasSuffix(p.URI, "/data"):
			id := strings.TrimSuffix(strings.TrimPrefix(p.URI, "test://template/"), "/data")
			c = protocol.ResourceContents{URI: p.URI, MimeType: "application/json", Text: `{"id":"` + id + `","templateTest":true,"data":"Data for ID: ` + id + `"}`}
		default:
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "no resource %q", p.URI))
			return true
		}
		w.Reply(protocol.ReadResourceResult{Contents: []protocol.ResourceContents{c}})
	case protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		var p protocol.SubscribeParams
		_ = json.Unmarshal(r.Params, &p)
		if r.Method == protocol.MethodResourcesSubscribe {
			r.Session.Subscribe(p.URI)
		} else {
			r.Session.Unsubscribe(p.URI)
		}
		w.Reply(json.RawMessage(`{}`))
	case protocol.MethodCompletionComplete:
		s.conformanceComplete(w, r)
	case protocol.MethodPromptsList:
		w.Reply(protocol.ListPromptsResult{Prompts: s.conformancePrompts()})
	case protocol.MethodPromptsGet:
		if s.mrtrPromptGet(w, r) {
			return true
		}
		s.conformancePromptGet(w, r)
	default:
		return false
	}
	return true
}

// conformancePrompts lists the fixture prompts.
func (s *server) conformancePrompts() []protocol.Prompt {
	prompts := []protocol.Prompt{
		{Name: "test_simple_prompt", Description: "A simple prompt without arguments."},
		{Name: "test_prompt_with_arguments", Description: "A prompt with arguments.", Arguments: []protocol.PromptArgument{
			{Name: "arg1", Description: "First argument", Required: true}, {Name: "arg2", Description: "Second argument", Required: true}}},
		{Name: "test_prompt_with_embedded_resource", Description: "A prompt with an embedded resource.", Arguments: []protocol.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		{Name: "test_prompt_with_image", Description: "A prompt with image content."},
		{Name: mrtrPrompt, Description: "Asks (input_required) for the context to use, then renders."},
	}
	s.tmu.Lock()
	if s.dynamicPrompt {
		prompts = append(prompts, protocol.Prompt{Name: dynamicPrompt, Description: "Added by test_trigger_prompt_change."})
	}
	s.tmu.Unlock()
	return prompts
}

// conformancePromptGet renders a fixture prompt.
func (s *server) conformancePromptGet(w mcpserver.ResponseWriter, r *mcpserver.Request) {
	var p protocol.GetPromptParams
	_ = json.Unmarshal(r.Params, &p)
	msg := func(c protocol.Content) protocol.PromptMessage {
		return protocol.PromptMessage{Role: "user", Content: c}
	}
	var msgs []protocol.PromptMessage
	switch p.Name {
	case "test_simple_prompt":
		msgs = []protocol.PromptMessage{msg(protocol.TextContent("This is a simple prompt for testing."))}
	case "test_prompt_with_arguments":
		msgs = []protocol.PromptMessage{msg(protocol.TextContent("Prompt with arguments: arg1='" + p.Arguments["arg1"] + "', arg2='" + p.Arguments["arg2"] + "'"))}
	case "test_prompt_with_embedded_resource":
		msgs = []protocol.PromptMessage{
			msg(protocol.Content{Type: protocol.ContentResource, Resource: &protocol.ResourceContents{URI: p.Arguments["resourceUri"], MimeType: "text/plain", Text: "Embedded resource content for testing."}}),
			msg(protocol.TextContent("Please process the embedded resource above.")),
		}
	case "test_prompt_with_image":
		msgs = []protocol.PromptMessage{msg(protocol.Content{Type: protocol.ContentImage, Data: tinyPNG, MimeType: "image/png"}), msg(protocol.TextContent("Please analyze the image above."))}
	case dynamicPrompt:
		msgs = []protocol.PromptMessage{msg(protocol.TextContent("A prompt that comes and goes."))}
	default:
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "no prompt %q", p.Name))
		return
	}
	w.Reply(protocol.GetPromptResult{Messages: msgs})
}
