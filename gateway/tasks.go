package gateway

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663), passed
// through to the servers behind the gateway. A server that supports it
// decides which of its tools run as tasks; the gateway declares the
// extension (to a stateless-era client), passes the client's declaration
// of it on with every request (so that a server creates tasks only for a
// client that follows them, and answers -32021 for a tool that only runs
// as one), and routes tasks/get, tasks/update and tasks/cancel to the
// server that created the task. The task ids the client sees name that
// server: "<server>/<its task id>" (the server's name path-escaped), so
// the gateway keeps no table of tasks. tasks/get, tasks/update and
// tasks/cancel from a client that did not declare the extension are
// -32021; a task id naming no server, -32602.
//
// Under access rules (or a resource server) a task is its creator's: the
// id the client sees is "<server>/<tag>/<its task id>", the tag a MAC of
// the caller, the server and the task id under the gateway's task key
// (accessView.taskTag), so that another caller's tasks/get, tasks/update or
// tasks/cancel of it is refused (CodeAccessDenied), as is one of a
// server the caller may no longer use.

// gatewayTaskID is the task id a client sees for a server's task; tag,
// when not nil, binds it to its caller (taskTag).
func gatewayTaskID(server, id string, tag func(server, id string) string) string {
	if tag != nil {
		return url.PathEscape(server) + "/" + tag(server, id) + "/" + id
	}
	return url.PathEscape(server) + "/" + id
}

// splitTaskID reverses gatewayTaskID.
func splitTaskID(id string) (server, taskID string, ok bool) {
	esc, taskID, ok := strings.Cut(id, "/")
	if !ok || taskID == "" {
		return "", "", false
	}
	server, err := url.PathUnescape(esc)
	return server, taskID, err == nil && server != ""
}

// withTaskID returns the JSON object raw with its top-level taskId member
// replaced by to(taskId) (raw unchanged when it has none).
func withTaskID(raw json.RawMessage, to func(string) string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	var id string
	if v, ok := obj["taskId"]; !ok || json.Unmarshal(v, &id) != nil {
		return raw, nil
	}
	obj["taskId"], _ = json.Marshal(to(id))
	return json.Marshal(obj)
}

// taskCreated returns a server's CreateTaskResult with the task id the
// client sees (bound to its caller by tag, when not nil).
func (pl *pool) taskCreated(server string, tag func(server, id string) string, res *protocol.CallToolResult) any {
	raw, err := json.Marshal(res)
	if err == nil {
		raw, err = withTaskID(raw, func(id string) string { return gatewayTaskID(server, id, tag) })
	}
	if err != nil {
		return res
	}
	return protocol.ValidJSON(raw)
}

// missingTasks is the -32021 error of a tasks method from a client that
// did not declare the extension.
func missingTasks(method string) *protocol.Error {
	e := errorf(protocol.CodeMissingRequiredClientCapability, "%s needs the %s extension, which the request's clientCapabilities do not declare", method, protocol.ExtensionTasks)
	e.Data, _ = json.Marshal(protocol.MissingCapabilityData{RequiredCapabilities: protocol.ClientCapabilities{
		Extensions: map[string]json.RawMessage{protocol.ExtensionTasks: json.RawMessage(`{}`)}}})
	return e
}

// taskRequest passes tasks/get, tasks/update or tasks/cancel of a
// stateless-era client to the server that runs the task, when the task
// is the caller's and the access rules let it use the server.
func (g *Gateway) taskRequest(ctx context.Context, m *mcpserver.Request) (any, *protocol.Error) {
	pl := g.pool
	src, ok := pl.b.(ServerSource)
	if requestOf(ctx) == nil || !ok {
		return nil, errorf(protocol.CodeMethodNotFound, "method not found: %s", m.Method)
	}
	caps := m.Capabilities()
	if !caps.HasExtension(protocol.ExtensionTasks) {
		return nil, missingTasks(m.Method)
	}
	var params map[string]json.RawMessage
	var id string
	if json.Unmarshal(m.Params, &params) != nil || json.Unmarshal(params["taskId"], &id) != nil || id == "" {
		return nil, errorf(protocol.CodeInvalidParams, "%s: want {taskId}", m.Method)
	}
	server, taskID, ok := splitTaskID(id)
	tag := g.view.taskTag(ctx)
	var mac string
	if ok && tag != nil {
		mac, taskID, ok = strings.Cut(taskID, "/")
		ok = ok && taskID != ""
	}
	if !ok || !pl.knownServer(server) {
		return nil, errorf(protocol.CodeInvalidParams, "unknown task %q", id)
	}
	if tag != nil && !hmac.Equal([]byte(mac), []byte(tag(server, taskID))) {
		e := errorf(CodeAccessDenied, "%v: task %q is not this caller's", ErrAccessDenied, id)
		e.Data, _ = json.Marshal(map[string]any{"reason": "owner", "server": server})
		return nil, e
	}
	if perr := g.view.refuseServer(ctx, "task "+strconv.Quote(id), server); perr != nil {
		return nil, perr
	}
	params["taskId"], _ = json.Marshal(taskID)
	delete(params, "_meta")
	upstream, err := json.Marshal(params)
	if err != nil {
		return nil, errorf(protocol.CodeInvalidParams, "%s: %v", m.Method, err)
	}
	raw, err := src.Server(server).Request(ctx, m.Method, upstream, mcpvisor.RequestOptions{Capabilities: &caps})
	if err != nil {
		return nil, rpcError(err)
	}
	if raw, err = withTaskID(raw, func(id string) string { return gatewayTaskID(server, id, tag) }); err != nil {
		return nil, errorf(protocol.CodeInternalError, "%s: the server's result: %v", m.Method, err)
	}
	return protocol.ValidJSON(raw), nil
}

// knownServer reports whether the supervisor has a server by that name.
func (pl *pool) knownServer(name string) bool {
	for _, st := range pl.b.Status() {
		if st.Name == name {
			return true
		}
	}
	return false
}
