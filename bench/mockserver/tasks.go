package mockserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) for the
// conformance suite's tasks-* scenarios, served with Options.Conformance
// to clients of the stateless era: the tools below run as tasks when the
// request's clientCapabilities declare the extension (the server alone
// decides; a legacy task member in the params changes nothing), and
// synchronously otherwise (a tool that only runs as a task answers
// -32021). tasks/get reports a task (its result or error inlined once
// terminal, its input requests while it waits for them), tasks/update
// delivers answers to those, tasks/cancel cancels it.
//
//	greet {name}                sync only: "Hello, {name}!"
//	slow_compute {seconds}      sleeps, then answers (a task, cancellable)
//	failing_job                 task only: a tool error after a moment
//	protocol_error_job          a task that fails with a JSON-RPC error
//	confirm_delete {filename}   a task that asks (elicitation) for a confirmation
//	multi_input                 a task that asks two questions at once
//	test_tool_with_task         task only: asks for a name (input_required), then runs as a task

// Task timings.
const (
	taskTTL          = 10 * time.Minute
	taskPollInterval = 200 * time.Millisecond
	failingJobDelay  = 300 * time.Millisecond
)

// mockTask is one task. mu guards everything but id and cancel.
type mockTask struct {
	id     string
	cancel context.CancelFunc

	mu      sync.Mutex
	status  string
	created time.Time
	updated time.Time
	result  json.RawMessage // completed
	err     *protocol.Error // failed
	asked   protocol.InputRequests
	answers chan protocol.InputResponses // tasks/update to the task's goroutine
}

// taskState is the tasks the server runs. mu guards byID.
type taskState struct {
	mu   sync.Mutex
	byID map[string]*mockTask
}

func tasksTools() []protocol.Tool {
	tool := func(name, desc, props, support string, required ...string) protocol.Tool {
		req, _ := json.Marshal(append([]string{}, required...))
		t := protocol.Tool{Name: name, Description: desc,
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)}
		if support != "" {
			t.Extra = protocol.Extra{"execution": json.RawMessage(`{"taskSupport":"` + support + `"}`)}
		}
		return t
	}
	return []protocol.Tool{
		tool("greet", "Says hello (never a task).", `"name":{"type":"string"}`, "", "name"),
		tool("slow_compute", "Sleeps seconds, then answers; runs as a task for a client with the tasks extension.",
			`"seconds":{"type":"number"},"label":{"type":"string"}`, "optional"),
		tool("failing_job", "Fails (a tool error) after a moment; only runs as a task.", ``, "required"),
		tool("protocol_error_job", "A task that fails with a JSON-RPC error.", ``, "optional"),
		tool("confirm_delete", "Asks for a confirmation (elicitation) before deleting filename.", `"filename":{"type":"string"}`, "optional"),
		tool("multi_input", "Asks two questions at once, then answers.", ``, "optional"),
		tool("test_tool_with_task", "Asks for a name (input_required), then runs as a task greeting it.", ``, "required"),
	}
}

var confirmRequest = protocol.InputRequest{Method: protocol.MethodElicitationCreate, Params: json.RawMessage(
	`{"mode":"form","message":"Delete the file?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}}`)}

// tasksExtension reports whether request params declare the extension.
func tasksExtension(params json.RawMessage) bool {
	var p struct {
		Meta protocol.Meta `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	var caps protocol.ClientCapabilities
	p.Meta.Get(protocol.MetaClientCapabilities, &caps)
	return caps.HasExtension(protocol.ExtensionTasks)
}

// tasksCall runs the task fixtures; it reports false for other tools.
func (s *server) tasksCall(w mcpserver.ResponseWriter, r *mcpserver.Request, name string) bool {
	var p struct {
		Arguments struct {
			Name     string  `json:"name"`
			Seconds  float64 `json:"seconds"`
			Filename string  `json:"filename"`
		} `json:"arguments"`
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(r.Params, &p)
	a := p.Arguments
	ext := r.Modern() && tasksExtension(r.Params)
	text := func(t string, isError bool) protocol.CallToolResult {
		return protocol.CallToolResult{ResultType: protocol.ResultComplete, IsError: isError, Content: []protocol.Content{protocol.TextContent(t)}}
	}
	needsTask := func() {
		missing(w, protocol.ClientCapabilities{Extensions: map[string]json.RawMessage{protocol.ExtensionTasks: emptyObject}})
	}
	var run func(ctx context.Context, t *mockTask) // the task's work; nil: answered synchronously
	switch name {
	case "greet":
		w.Reply(text("Hello, "+a.Name+"!", false))
		return true
	case "slow_compute":
		d := time.Duration(a.Seconds * float64(time.Second))
		if !ext {
			s.wg.Go(func() {
				time.Sleep(d)
				w.Reply(text("computed", false))
			})
			return true
		}
		run = func(ctx context.Context, t *mockTask) {
			select {
			case <-time.After(d):
				t.complete(text("computed", false))
			case <-ctx.Done():
			}
		}
	case "failing_job":
		if !ext {
			needsTask()
			return true
		}
		run = func(ctx context.Context, t *mockTask) {
			select {
			case <-time.After(failingJobDelay):
				t.complete(text("the job failed", true))
			case <-ctx.Done():
			}
		}
	case "protocol_error_job":
		if !ext {
			w.Error(protocol.NewError(protocol.CodeInternalError, "the job broke"))
			return true
		}
		run = func(_ context.Context, t *mockTask) {
			t.fail(protocol.NewError(protocol.CodeInternalError, "the job broke"))
		}
	case "confirm_delete", "multi_input":
		asked := protocol.InputRequests{"confirm": confirmRequest}
		if name == "multi_input" {
			asked = protocol.InputRequests{"first": elicitName, "second": confirmRequest}
		}
		if !ext {
			answers, perr := protocol.ParseInputResponses(p.InputResponses)
			switch {
			case perr != nil:
				w.Error(perr)
			case len(answers) < len(asked):
				inputRequired(w, asked, "")
			default:
				w.Reply(text("done: "+a.Filename, false))
			}
			return true
		}
		run = func(ctx context.Context, t *mockTask) {
			if t.ask(ctx, asked) {
				t.complete(text("done: "+a.Filename, false))
			}
		}
	case "test_tool_with_task":
		if !ext {
			needsTask()
			return true
		}
		answers, perr := protocol.ParseInputResponses(p.InputResponses)
		if perr != nil {
			w.Error(perr)
			return true
		}
		if answers["user_name"] == nil {
			inputRequired(w, protocol.InputRequests{"user_name": elicitName}, "")
			return true
		}
		who := elicitedField(answers["user_name"], "name")
		run = func(ctx context.Context, t *mockTask) {
			select {
			case <-time.After(100 * time.Millisecond):
				t.complete(text("Hello, "+who+", from a task!", false))
			case <-ctx.Done():
			}
		}
	default:
		return false
	}
	t := s.startTask(run)
	w.Reply(t.createResult())
	return true
}

// startTask registers a task (tasks/get finds it at once) and runs it.
func (s *server) startTask(run func(ctx context.Context, t *mockTask)) *mockTask {
	var b [12]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now().UTC()
	t := &mockTask{id: "task-" + hex.EncodeToString(b[:]), cancel: cancel, status: protocol.TaskWorking, created: now, updated: now,
		answers: make(chan protocol.InputResponses, 8)}
	s.tasks.mu.Lock()
	if s.tasks.byID == nil {
		s.tasks.byID = map[string]*mockTask{}
	}
	s.tasks.byID[t.id] = t
	s.tasks.mu.Unlock()
	s.wg.Go(func() {
		defer cancel()
		run(ctx, t)
	})
	time.AfterFunc(taskTTL, func() {
		cancel()
		s.tasks.mu.Lock()
		delete(s.tasks.byID, t.id)
		s.tasks.mu.Unlock()
	})
	return t
}

// fields returns the task's members (without resultType).
func (t *mockTask) fields() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := map[string]any{
		"taskId": t.id, "status": t.status,
		"createdAt": t.created.Format(time.RFC3339Nano), "lastUpdatedAt": t.updated.Format(time.RFC3339Nano),
		"ttlMs": taskTTL.Milliseconds(), "pollIntervalMs": taskPollInterval.Milliseconds(),
	}
	switch t.status {
	case protocol.TaskCompleted:
		f["result"] = t.result
	case protocol.TaskFailed:
		f["error"] = t.err
	case protocol.TaskInputRequired:
		f["inputRequests"] = t.asked
	}
	return f
}

// createResult is the CreateTaskResult of t.
func (t *mockTask) createResult() map[string]any {
	f := t.fields()
	f["resultType"] = protocol.ResultTask
	delete(f, "result")
	delete(f, "error")
	delete(f, "inputRequests")
	return f
}

// settle moves t to a terminal status, unless it is terminal already.
func (t *mockTask) settle(status string, result json.RawMessage, err *protocol.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if protocol.TaskTerminal(t.status) {
		return
	}
	t.status, t.result, t.err, t.asked, t.updated = status, result, err, nil, time.Now().UTC()
}

func (t *mockTask) complete(res protocol.CallToolResult) {
	raw, _ := json.Marshal(res)
	t.settle(protocol.TaskCompleted, raw, nil)
}

func (t *mockTask) fail(err *protocol.Error) { t.settle(protocol.TaskFailed, nil, err) }

// ask parks t in input_required until every request has an answer
// (tasks/update may bring them a few at a time); false when cancelled.
func (t *mockTask) ask(ctx context.Context, reqs protocol.InputRequests) bool {
	pending := protocol.InputRequests{}
	for k, r := range reqs {
		pending[k] = r
	}
	for len(pending) > 0 {
		t.mu.Lock()
		if protocol.TaskTerminal(t.status) {
			t.mu.Unlock()
			return false
		}
		t.status, t.asked, t.updated = protocol.TaskInputRequired, pending, time.Now().UTC()
		t.mu.Unlock()
		select {
		case answers := <-t.answers:
			next := protocol.InputRequests{}
			for k, r := range pending {
				if _, ok := answers[k]; !ok {
					next[k] = r
				}
			}
			pending = next
		case <-ctx.Done():
			return false
		}
	}
	t.mu.Lock()
	if !protocol.TaskTerminal(t.status) {
		t.status, t.asked, t.updated = protocol.TaskWorking, nil, time.Now().UTC()
	}
	t.mu.Unlock()
	return true
}

// tasksDispatch answers tasks/get, tasks/update and tasks/cancel; it
// reports false for other methods.
func (s *server) tasksDispatch(w mcpserver.ResponseWriter, r *mcpserver.Request) bool {
	switch r.Method {
	case protocol.MethodTasksGet, protocol.MethodTasksUpdate, protocol.MethodTasksCancel:
	default:
		return false
	}
	if !r.Modern() {
		return false // the handshake eras' tasks are not these
	}
	if !tasksExtension(r.Params) {
		missing(w, protocol.ClientCapabilities{Extensions: map[string]json.RawMessage{protocol.ExtensionTasks: emptyObject}})
		return true
	}
	var p protocol.TaskParams
	_ = json.Unmarshal(r.Params, &p)
	s.tasks.mu.Lock()
	t := s.tasks.byID[p.TaskID]
	s.tasks.mu.Unlock()
	if t == nil {
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "unknown task %q", p.TaskID))
		return true
	}
	ack := map[string]any{"resultType": protocol.ResultComplete}
	switch r.Method {
	case protocol.MethodTasksGet:
		f := t.fields()
		f["resultType"] = protocol.ResultComplete
		w.Reply(f)
		return true
	case protocol.MethodTasksUpdate:
		answers, perr := protocol.ParseInputResponses(p.InputResponses)
		if perr != nil {
			w.Error(perr)
			return true
		}
		if len(answers) > 0 {
			// The task moves on before the ack: the next tasks/get sees it.
			t.mu.Lock()
			for k := range answers {
				delete(t.asked, k)
			}
			t.mu.Unlock()
			select {
			case t.answers <- answers:
			default:
			}
		}
	case protocol.MethodTasksCancel:
		t.settle(protocol.TaskCancelled, nil, nil)
		t.cancel()
	}
	w.Reply(ack)
	return true
}
