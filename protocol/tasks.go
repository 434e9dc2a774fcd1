package protocol

import "encoding/json"

// Tasks (2025-11-25, experimental): a task-augmented request is accepted
// at once with a CreateTaskResult; the requestor polls tasks/get and
// fetches the outcome with tasks/result.

// Task methods and notifications.
const (
	MethodTasksGet         = "tasks/get"
	MethodTasksResult      = "tasks/result"
	MethodTasksCancel      = "tasks/cancel"
	MethodTasksList        = "tasks/list"
	NotificationTaskStatus = "notifications/tasks/status"
)

// The task statuses. Completed, failed and cancelled are terminal.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// TaskTerminal reports whether status is final.
func TaskTerminal(status string) bool {
	return status == TaskCompleted || status == TaskFailed || status == TaskCancelled
}

// TaskMetadata is the task member of a task-augmented request.
type TaskMetadata struct {
	TTL *int64 `json:"ttl,omitempty"` // requested lifetime in milliseconds
}

// Task is a task's state (tasks/get, tasks/cancel, notifications/tasks/status).
type Task struct {
	Meta          Meta   `json:"_meta,omitempty"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt,omitempty"`
	LastUpdatedAt string `json:"lastUpdatedAt,omitempty"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval,omitempty"` // milliseconds
}

// CreateTaskResult answers a task-augmented request.
type CreateTaskResult struct {
	Meta Meta `json:"_meta,omitempty"`
	Task Task `json:"task"`
}

// TaskCallToolParams is tools/call augmented with a task.
type TaskCallToolParams struct {
	Meta      Meta            `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Task      TaskMetadata    `json:"task"`
}

// TaskIDParams is the params of tasks/get, tasks/result and tasks/cancel.
type TaskIDParams struct {
	Meta   Meta   `json:"_meta,omitempty"`
	TaskID string `json:"taskId"`
}

// ListTasksResult is one page of tasks/list.
type ListTasksResult struct {
	Meta       Meta   `json:"_meta,omitempty"`
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}
