package mockserver

import (
	"encoding/json"
	"slices"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The fixtures of the conformance suite's scenarios for the stateless era
// (server-stateless, json-schema-2020-12, http-custom-header-server-
// validation), served with Options.Conformance: diagnostic tools that
// need a capability, log, or change the tool and prompt lists, a tool
// with a JSON Schema 2020-12 input schema, and one whose arguments are
// mirrored into Mcp-Param-* headers.

// jsonSchema2020Tool is the json-schema-2020-12 scenario's tool: its
// schema uses $schema, $defs with an $anchor, a $ref, composition and
// conditional keywords, and additionalProperties, all of which a client
// or gateway must pass on untouched.
const jsonSchema2020Tool = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
	`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
	`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},` +
	`"phone":{"type":"string"},"email":{"type":"string"}},` +
	`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
	`"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},` +
	`"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

// The names of the tool and prompt the list-change hooks add and remove.
const (
	dynamicTool   = "test_dynamic_tool"
	dynamicPrompt = "test_dynamic_prompt"
)

func statelessTools() []protocol.Tool {
	obj := json.RawMessage(`{"type":"object","properties":{}}`)
	t := func(name, desc string) protocol.Tool {
		return protocol.Tool{Name: name, Description: desc, InputSchema: obj}
	}
	return []protocol.Tool{
		t("test_missing_capability", "Needs the sampling capability: without it in the request's clientCapabilities, -32021."),
		t("test_streaming_elicitation", "Needs elicitation; asks for a name with input_required (never with a request on the stream)."),
		t("test_logging_tool", "Logs (notifications/message) only when the request's _meta carries a logLevel, then answers."),
		t("test_trigger_tool_change", "Adds "+dynamicTool+" (or removes it) and sends tools/list_changed."),
		t("test_trigger_prompt_change", "Adds "+dynamicPrompt+" (or removes it) and sends prompts/list_changed."),
		{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features", InputSchema: json.RawMessage(jsonSchema2020Tool)},
		{Name: "test_custom_headers", Description: "Echoes region and query; region is mirrored into the Mcp-Param-Region header (x-mcp-header).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"query":{"type":"string"}},"required":["region"]}`)},
	}
}

// statelessCall runs these fixtures; it reports false for other tools.
func (s *server) statelessCall(w mcpserver.ResponseWriter, r *mcpserver.Request, name string) bool {
	var p struct {
		Meta      protocol.Meta `json:"_meta"`
		Arguments struct {
			Region string `json:"region"`
			Query  string `json:"query"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(r.Params, &p)
	caps := r.Capabilities()
	modern := r.Modern()
	text := func(t string) {
		w.Reply(protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(t)}})
	}
	switch name {
	case "test_missing_capability":
		if modern && caps.Sampling == nil {
			missing(w, protocol.ClientCapabilities{Sampling: &emptyObject})
			return true
		}
		text("the client declared sampling")
	case "test_streaming_elicitation":
		if !modern {
			text("no input asked: this fixture asks with input_required (2026-07-28)")
			return true
		}
		if caps.Elicitation == nil {
			missing(w, protocol.ClientCapabilities{Elicitation: &emptyObject})
			return true
		}
		var mr mrtrRequest
		_ = json.Unmarshal(r.Params, &mr)
		answers, perr := protocol.ParseInputResponses(mr.InputResponses)
		switch {
		case perr != nil:
			w.Error(perr)
		case answers["user_name"] == nil:
			inputRequired(w, protocol.InputRequests{"user_name": elicitName}, "")
		default:
			text("Hello, " + elicitedField(answers["user_name"], "name") + "!")
		}
	case "test_logging_tool":
		if _, ok := p.Meta[protocol.MetaLogLevel]; ok || !modern {
			s.srv.Broadcast(protocol.NotificationMessage, protocol.LoggingMessageParams{Level: protocol.LevelInfo, Logger: "conformance", Data: json.RawMessage(`"test_logging_tool ran"`)})
		}
		text("logged only if asked to")
	case "test_trigger_tool_change":
		s.tmu.Lock()
		if i := slices.IndexFunc(s.tools, func(t protocol.Tool) bool { return t.Name == dynamicTool }); i >= 0 {
			s.tools = slices.Delete(slices.Clone(s.tools), i, i+1)
		} else {
			s.tools = append(slices.Clip(s.tools), protocol.Tool{Name: dynamicTool, Description: "Added by test_trigger_tool_change.", InputSchema: json.RawMessage(`{"type":"object"}`)})
		}
		s.tmu.Unlock()
		text("tool list changed")
		s.srv.ListChanged(protocol.NotificationToolsListChanged)
	case "test_trigger_prompt_change":
		s.tmu.Lock()
		s.dynamicPrompt = !s.dynamicPrompt
		s.tmu.Unlock()
		text("prompt list changed")
		s.srv.ListChanged(protocol.NotificationPromptsListChanged)
	case "json_schema_2020_12_tool":
		text("schema accepted")
	case "test_custom_headers":
		text("region=" + p.Arguments.Region + " query=" + p.Arguments.Query)
	default:
		return false
	}
	return true
}
