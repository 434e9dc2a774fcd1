package mockserver

import (
	"encoding/json"
	"strings"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The fixtures of the conformance suite's server scenarios
// (@modelcontextprotocol/conformance `server`), served with
// Options.Conformance (-conformance): the tools, resources and prompts
// the scenarios call by name. Sampling, elicitation, progress and
// completion fixtures are not served.

// tinyPNG is a 1×1 transparent PNG; tinyWAV a 44-byte silent WAV header.
const (
	tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	tinyWAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
)

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
	}
}

var embeddedText = protocol.Content{Type: protocol.ContentResource, Resource: &protocol.ResourceContents{
	URI: "test://embedded-resource", MimeType: "text/plain", Text: "This is an embedded resource content."}}

// conformanceCall answers a fixture tool; it reports false for other
// tools.
func (s *server) conformanceCall(out output, id protocol.ID, name string) bool {
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
			params, _ := json.Marshal(protocol.LoggingMessageParams{Level: protocol.LevelInfo, Logger: "conformance", Data: json.RawMessage(`"` + msg + `"`)})
			s.hub.broadcast(protocol.NotificationMessage, params)
		}
		res.Content = []protocol.Content{text("Tool with logging executed successfully")}
	case "test_error_handling":
		res.IsError, res.Content = true, []protocol.Content{text("This tool intentionally returns an error for testing")}
	default:
		return false
	}
	s.reply(out, id, res)
	return true
}

// conformanceDispatch answers the resource and prompt requests of the
// fixtures; it reports false for anything else.
func (s *server) conformanceDispatch(out output, m *protocol.Message) bool {
	switch m.Method {
	case protocol.MethodResourcesList:
		s.reply(out, m.ID, protocol.ListResourcesResult{Resources: []protocol.Resource{
			{URI: "test://static-text", Name: "static-text", MimeType: "text/plain"},
			{URI: "test://static-binary", Name: "static-binary", MimeType: "image/png"},
			{URI: "test://watched-resource", Name: "watched-resource", MimeType: "text/plain"},
		}})
	case protocol.MethodResourcesTemplatesList:
		s.reply(out, m.ID, protocol.ListResourceTemplatesResult{ResourceTemplates: []protocol.ResourceTemplate{
			{URITemplate: "test://template/{id}/data", Name: "template", MimeType: "application/json"},
		}})
	case protocol.MethodResourcesRead:
		var p protocol.ReadResourceParams
		_ = json.Unmarshal(m.Params, &p)
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
			s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidParams, "no resource %q", p.URI))
			return true
		}
		s.reply(out, m.ID, protocol.ReadResourceResult{Contents: []protocol.ResourceContents{c}})
	case protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		s.reply(out, m.ID, json.RawMessage(`{}`))
	case protocol.MethodPromptsList:
		s.reply(out, m.ID, protocol.ListPromptsResult{Prompts: []protocol.Prompt{
			{Name: "test_simple_prompt", Description: "A simple prompt without arguments."},
			{Name: "test_prompt_with_arguments", Description: "A prompt with arguments.", Arguments: []protocol.PromptArgument{
				{Name: "arg1", Description: "First argument", Required: true}, {Name: "arg2", Description: "Second argument", Required: true}}},
			{Name: "test_prompt_with_embedded_resource", Description: "A prompt with an embedded resource.", Arguments: []protocol.PromptArgument{
				{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
			{Name: "test_prompt_with_image", Description: "A prompt with image content."},
		}})
	case protocol.MethodPromptsGet:
		var p protocol.GetPromptParams
		_ = json.Unmarshal(m.Params, &p)
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
		default:
			s.replyError(out, m.ID, protocol.NewError(protocol.CodeInvalidParams, "no prompt %q", p.Name))
			return true
		}
		s.reply(out, m.ID, protocol.GetPromptResult{Messages: msgs})
	default:
		return false
	}
	return true
}
