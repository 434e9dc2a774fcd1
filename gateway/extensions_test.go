package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/protocol"
)

const withTasks = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// taskOf polls tasks/get (at most 10 s) until the task's status is want.
func taskOf(t *testing.T, c *statelessClient, id, want string) map[string]json.RawMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := c.call(protocol.MethodTasksGet, `{"taskId":"`+id+`"}`).result(t)
		if string(res["status"]) == `"`+want+`"` {
			return res
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "task "+id+" not "+want+" within 10s", "last: %s", res["status"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The tasks extension is passed through: the gateway declares it, a
// client that declares it gets the server's tasks (ids naming the
// server) and follows, answers and cancels them through the gateway; a
// client that does not gets plain results, and -32021 for the tasks
// methods and for a tool that only runs as a task. Handshake-era
// sessions have no such methods.
func TestTasksExtensionPassesThrough(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{"fx": fixtures()}, gateway.Options{Names: gateway.NamesBare})
	c := newStatelessClient(t, url, withTasks)
	disc := c.call(protocol.MethodDiscover, `{}`).result(t)
	assert.Contains(t, string(disc["capabilities"]), `"io.modelcontextprotocol/tasks":{}`)

	created := c.call(protocol.MethodToolsCall, `{"name":"slow_compute","arguments":{"seconds":0.1}}`).result(t)
	assert.Equal(t, `"task"`, string(created["resultType"]))
	assert.NotContains(t, created, "content")
	var id string
	require.NoError(t, json.Unmarshal(created["taskId"], &id))
	assert.True(t, strings.HasPrefix(id, "fx/task-"), id)
	done := taskOf(t, c, id, protocol.TaskCompleted)
	assert.JSONEq(t, `"`+id+`"`, string(done["taskId"]), "the id the client knows")
	assert.Contains(t, string(done["result"]), `"computed"`)
	assert.Equal(t, `"complete"`, string(done["resultType"]))

	// A task that asks for input; tasks/update answers it.
	asking := c.call(protocol.MethodToolsCall, `{"name":"confirm_delete","arguments":{"filename":"f.txt"}}`).result(t)
	require.NoError(t, json.Unmarshal(asking["taskId"], &id))
	waiting := taskOf(t, c, id, protocol.TaskInputRequired)
	assert.Contains(t, string(waiting["inputRequests"]), `"confirm"`)
	ack := c.call(protocol.MethodTasksUpdate, `{"taskId":"`+id+`","inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}}`).result(t)
	assert.Equal(t, map[string]json.RawMessage{"resultType": json.RawMessage(`"complete"`)}, ack)
	assert.Contains(t, string(taskOf(t, c, id, protocol.TaskCompleted)["result"]), "done: f.txt")

	// Cancel.
	slow := c.call(protocol.MethodToolsCall, `{"name":"slow_compute","arguments":{"seconds":60}}`).result(t)
	require.NoError(t, json.Unmarshal(slow["taskId"], &id))
	ack = c.call(protocol.MethodTasksCancel, `{"taskId":"`+id+`"}`).result(t)
	assert.Equal(t, `"complete"`, string(ack["resultType"]))
	taskOf(t, c, id, protocol.TaskCancelled)

	// Unknown tasks.
	for _, unknown := range []string{"nope", "nobody/task-1", "fx/task-unknown"} {
		a := c.call(protocol.MethodTasksGet, `{"taskId":"`+unknown+`"}`)
		assert.Equal(t, int64(protocol.CodeInvalidParams), a.code(t), unknown)
	}

	// A client without the extension.
	plain := newStatelessClient(t, url, `{}`)
	sync := plain.call(protocol.MethodToolsCall, `{"name":"slow_compute","arguments":{"seconds":0}}`).result(t)
	assert.Equal(t, `"complete"`, string(sync["resultType"]), "runs synchronously")
	assert.Contains(t, string(sync["content"]), "computed")
	for _, method := range []string{protocol.MethodTasksGet, protocol.MethodTasksCancel, protocol.MethodTasksUpdate} {
		a := plain.call(method, `{"taskId":"`+id+`"}`)
		assert.Equal(t, http.StatusBadRequest, a.status)
		assert.Equal(t, int64(protocol.CodeMissingRequiredClientCapability), a.code(t), method)
		assert.JSONEq(t, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`, string(a.msg.Error.Data))
	}
	required := plain.call(protocol.MethodToolsCall, `{"name":"failing_job","arguments":{}}`)
	assert.Equal(t, http.StatusBadRequest, required.status, "the server's -32021 is a 400")
	assert.Equal(t, int64(protocol.CodeMissingRequiredClientCapability), required.code(t))

	rc := &rawClient{t: t, url: url}
	rc.initialize()
	_, body := rc.post(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `"}}`)
	assert.Contains(t, body, `"code":-32601`, "a handshake-era session has no tasks/get of this extension")
}

// The skills extension: the gateway declares it while a server behind it
// does, lists every such server's skills, and sends skills/get and
// resources/directory/read to the server that knows the URI.
func TestSkillsExtensionIsGathered(t *testing.T) {
	_, url := statelessGateway(t, map[string]mcpvisor.ServerConfig{
		"fx":    fixtures(),
		"other": {Config: mockserver.Command("-name", "other")},
	}, gateway.Options{})
	c := newStatelessClient(t, url, `{}`)
	disc := c.call(protocol.MethodDiscover, `{}`).result(t)
	assert.Contains(t, string(disc["capabilities"]), `"io.modelcontextprotocol/skills":{"directoryRead":true}`)

	list := c.call(protocol.MethodSkillsList, `{}`).result(t)
	var skills []struct {
		URI string `json:"uri"`
	}
	require.NoError(t, json.Unmarshal(list["skills"], &skills))
	require.Len(t, skills, 1)
	assert.Equal(t, "skill://mcpvisor/demo-skill/SKILL.md", skills[0].URI)
	assert.Contains(t, list, "ttlMs")
	assert.Contains(t, list, "cacheScope")

	got := c.call(protocol.MethodSkillsGet, `{"uri":"skill://mcpvisor/demo-skill/SKILL.md"}`).result(t)
	assert.Contains(t, string(got["skill"]), `"name":"demo-skill"`)
	missing := c.call(protocol.MethodSkillsGet, `{"uri":"skill://nobody/none/SKILL.md"}`)
	assert.Equal(t, int64(protocol.CodeInvalidParams), missing.code(t))
	dir := c.call(protocol.MethodResourcesDirectoryRead, `{"uri":"skill://mcpvisor/demo-skill"}`).result(t)
	assert.Contains(t, string(dir["resources"]), `"mimeType":"inode/directory"`)
	read := c.call(protocol.MethodResourcesRead, `{"uri":"skill://mcpvisor/demo-skill/SKILL.md"}`).result(t)
	assert.Contains(t, string(read["contents"]), "name: demo-skill")

	// Without a server that offers skills, the gateway declares none.
	_, plainURL := statelessGateway(t, map[string]mcpvisor.ServerConfig{"other": {Config: mockserver.Command("-name", "other")}}, gateway.Options{})
	p := newStatelessClient(t, plainURL, `{}`)
	assert.NotContains(t, string(p.call(protocol.MethodDiscover, `{}`).result(t)["capabilities"]), "skills")
	assert.Equal(t, int64(protocol.CodeMethodNotFound), p.call(protocol.MethodSkillsList, `{}`).code(t))
}
