package management

import (
	"encoding/json"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Definitions returns the management tools' definitions
// (name, description, input schema, annotations), for hosts that run
// them themselves. The input schemas are those of sdk-tools.d.ts: the
// same members, required as there.
func Definitions() []protocol.Tool {
	schema := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(append([]string{}, required...)) // [] rather than null: strict validators reject null
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
	}
	yes, no := true, false
	readOnly := &protocol.ToolAnnotations{ReadOnlyHint: &yes, OpenWorldHint: &no}
	// Subscribing changes what the host is told, not the server: not
	// destructive, and the same subscription twice is one.
	subscribing := &protocol.ToolAnnotations{ReadOnlyHint: &no, DestructiveHint: &no, IdempotentHint: &yes, OpenWorldHint: &no}
	const (
		server         = `"server":{"type":"string","description":"The MCP server's configured name."}`
		serverFilter   = `"server":{"type":"string","description":"Only this MCP server (its configured name); every server when omitted."}`
		uri            = `"uri":{"type":"string","description":"The resource's URI."}`
		reason         = `"reason":{"type":"string","description":"Why the subscription is wanted (shown to the user; optional)."}`
		subscriptionID = `"subscriptionId":{"type":"string","description":"The id the subscribing tool returned."}`
	)
	return []protocol.Tool{
		{Name: ToolListMcpResources,
			Description: "Lists the resources of the connected MCP servers (of one server when server is given), " +
				"as an array of {uri, name, mimeType?, description?, server}. Resource templates are listed by " + ToolListMcpResourceTemplates + ".",
			InputSchema: schema(serverFilter), Annotations: readOnly},
		{Name: ToolListMcpResourceTemplates,
			Description: "Lists the resource templates of the connected MCP servers (of one server when server is given), " +
				"as an array of {uriTemplate, name, mimeType?, description?, server}.",
			InputSchema: schema(serverFilter), Annotations: readOnly},
		{Name: ToolReadMcpResource,
			Description: "Reads a resource from an MCP server: {contents: [{uri, mimeType?, text?}]}. " +
				"Binary contents are described in text (their size), not included.",
			InputSchema: schema(server+","+uri, "server", "uri"), Annotations: readOnly},
		{Name: ToolSubscribeMcpResource,
			Description: "Subscribes to updates of a resource of an MCP server; updates arrive as events until unsubscribed. " +
				"Returns {subscribed, subscriptionId}.",
			InputSchema: schema(server+","+uri+","+reason, "server", "uri"), Annotations: subscribing},
		{Name: ToolUnsubscribeMcpResource,
			Description: "Ends a resource subscription, named by subscriptionId or by server and uri. Returns {unsubscribed}.",
			InputSchema: schema(`"server":{"type":"string","description":"The MCP server of the subscription."},` + uri + "," + subscriptionID),
			Annotations: subscribing},
		{Name: ToolSubscribePolling,
			Description: "Polls a tool of an MCP server (type \"tool\": toolName, arguments) or a resource (type \"resource\": uri) " +
				"every intervalMs milliseconds (at least 1000, default 5000) and reports each change as an event. " +
				"Returns {subscribed, subscriptionId}.",
			InputSchema: schema(`"type":{"type":"string","enum":["tool","resource"],"description":"What to poll."},`+server+
				`,"toolName":{"type":"string","description":"The tool to call, as the server names it (type tool)."}`+
				`,"arguments":{"type":"object","additionalProperties":true,"description":"The tool's arguments (type tool)."},`+
				`"uri":{"type":"string","description":"The resource to read (type resource)."}`+
				`,"intervalMs":{"type":"number","minimum":1000,"default":5000,"description":"Milliseconds between polls: at least 1000, default 5000."},`+
				reason, "type", "server", "intervalMs"),
			Annotations: subscribing},
		{Name: ToolUnsubscribePolling,
			Description: "Stops polling subscriptions: the one named by subscriptionId, or every one of server " +
				"(only those of target, a tool name or resource URI, when given). Returns {unsubscribed}.",
			InputSchema: schema(subscriptionID + `,"server":{"type":"string","description":"Stop the polls of this MCP server."},` +
				`"target":{"type":"string","description":"With server: only the polls of this tool name or resource URI."}`),
			Annotations: subscribing},
		{Name: ToolConnectMcp,
			Description: "Connects a configured MCP server (for instance a lazy one, connected only on demand) so that its tools join the tool list, " +
				"or disconnects it (its tools leave the list). Only servers of the configuration can be named. " +
				"Returns {server, connected, state, tools}.",
			InputSchema: schema(`"server":{"type":"string","description":"The configured name of the MCP server."},`+
				`"action":{"type":"string","enum":["connect","disconnect"],"default":"connect","description":"connect (the default) or disconnect."}`, "server"),
			Annotations: &protocol.ToolAnnotations{ReadOnlyHint: &no, DestructiveHint: &no, IdempotentHint: &yes, OpenWorldHint: &no}},
	}
}
