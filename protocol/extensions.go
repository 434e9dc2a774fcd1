package protocol

import "encoding/json"

// Extensions of 2026-07-28 (SEP-2133): declared under
// capabilities.extensions by identifier, on both sides.

// The extension identifiers.
const (
	// ExtensionTasks (SEP-2663): a server may answer tools/call with a
	// CreateTaskResult (resultType "task") and the client follows the task
	// with tasks/get, answers its input requests with tasks/update, and
	// cancels it with tasks/cancel. A client that did not declare it gets
	// plain results (or CodeMissingRequiredClientCapability for a tool
	// that only runs as a task).
	ExtensionTasks = "io.modelcontextprotocol/tasks"
	// ExtensionSkills (SEP-2640): skills served as skill:// resources,
	// listed with skills/list and fetched with skills/get.
	ExtensionSkills = "io.modelcontextprotocol/skills"
)

// The methods of the extensions. tasks/get and tasks/cancel are
// MethodTasksGet and MethodTasksCancel (shared with the 2025-11-25 tasks).
const (
	MethodTasksUpdate            = "tasks/update"
	MethodSkillsList             = "skills/list"
	MethodSkillsGet              = "skills/get"
	MethodResourcesDirectoryRead = "resources/directory/read"
)

// HasExtension reports whether caps declares the extension id.
func (c *ClientCapabilities) HasExtension(id string) bool {
	if c == nil {
		return false
	}
	_, ok := c.Extensions[id]
	return ok
}

// TaskParams is the params of tasks/get, tasks/cancel and tasks/update
// (whose InputResponses answer the task's input requests).
type TaskParams struct {
	Meta           Meta            `json:"_meta,omitempty"`
	TaskID         string          `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}
