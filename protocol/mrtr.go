package protocol

import (
	"encoding/json"
	"fmt"
)

// Multi round-trip requests (SEP-2322, 2026-07-28): a server that needs
// something from the client to answer tools/call, prompts/get or
// resources/read answers with an InputRequiredResult naming what it needs
// (elicitation, sampling, roots) and, optionally, an opaque requestState;
// the client gathers the answers and sends the same request again, under a
// new JSON-RPC id, with inputResponses and the unchanged requestState.
// This replaces the server-to-client requests of the handshake eras.

// The values of a result's resultType member. A result without one is
// complete (results of the handshake eras never carry it).
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
	// ResultTask marks a CreateTaskResult of the tasks extension
	// (ExtensionTasks).
	ResultTask = "task"
)

// InputRequest is one request a server asks the client to fulfil within
// an InputRequiredResult: elicitation/create, sampling/createMessage or
// roots/list with its params.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// InputRequests maps the server's keys to what it asks.
type InputRequests map[string]InputRequest

// InputResponses maps the keys of InputRequests to the client's results
// (an ElicitResult, a CreateMessageResult, a ListRootsResult), raw.
type InputResponses map[string]json.RawMessage

// InputRequiredResult is the interim answer to a request the server
// cannot complete without more input. At least one of InputRequests and
// RequestState is set.
type InputRequiredResult struct {
	Meta          Meta          `json:"_meta,omitempty"`
	ResultType    string        `json:"resultType"`
	InputRequests InputRequests `json:"inputRequests,omitempty"`
	RequestState  string        `json:"requestState,omitempty"`
}

// InputMethods are the requests an InputRequests entry may carry.
var InputMethods = []string{MethodElicitationCreate, MethodSamplingCreateMessage, MethodRootsList}

// mrtrMethods are the requests a server may answer with an
// InputRequiredResult.
var mrtrMethods = []string{MethodToolsCall, MethodPromptsGet, MethodResourcesRead}

// ResultTypeOf returns the resultType member of a result object, "" when
// it has none (which means complete).
func ResultTypeOf(result json.RawMessage) string {
	if v, ok := PlainStringMember(result, "resultType"); ok {
		return v
	}
	if _, found, ok := RawMember(result, "resultType"); ok && !found {
		return ""
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(result, &r)
	return r.ResultType
}

// ParseInputResponses validates the inputResponses member of a retried
// request: absent (nil) is fine; otherwise it must be an object whose
// values are objects (results). A client that sends anything else gets
// CodeInvalidParams.
func ParseInputResponses(raw json.RawMessage) (InputResponses, *Error) {
	if raw == nil {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, NewError(CodeInvalidParams, "inputResponses must be an object mapping input request keys to results")
	}
	for k, v := range obj {
		var inner map[string]json.RawMessage
		if json.Unmarshal(v, &inner) != nil || inner == nil {
			return nil, NewError(CodeInvalidParams, "inputResponses[%q] must be a result object", k)
		}
	}
	return obj, nil
}

// MRTRParams are the members a retried request adds to its params.
type MRTRParams struct {
	InputResponses InputResponses `json:"inputResponses,omitempty"`
	RequestState   string         `json:"requestState,omitempty"`
}

// withMRTR returns params (a JSON object) with inputResponses and
// requestState set to those of m (replacing any the object had).
func withMRTR(params json.RawMessage, m MRTRParams) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, fmt.Errorf("params are not an object: %w", err)
		}
	}
	delete(obj, "inputResponses")
	delete(obj, "requestState")
	if m.InputResponses != nil {
		raw, err := json.Marshal(m.InputResponses)
		if err != nil {
			return nil, err
		}
		obj["inputResponses"] = raw
	}
	if m.RequestState != "" {
		obj["requestState"], _ = json.Marshal(m.RequestState)
	}
	return json.Marshal(obj)
}

// MissingCapabilityData is the data of a
// CodeMissingRequiredClientCapability error: the capabilities the request
// needs, shaped like ClientCapabilities (e.g. {"sampling":{}}).
type MissingCapabilityData struct {
	RequiredCapabilities ClientCapabilities `json:"requiredCapabilities"`
}
