package mockserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The multi round-trip fixtures (SEP-2322) of the conformance suite's
// input-required-result-* scenarios, served with Options.Conformance to
// clients of the stateless era (2026-07-28): tools and a prompt that
// answer with an InputRequiredResult until the retry carries the answers
// they asked for. They keep no state between rounds: what a later round
// needs travels in requestState, signed (HMAC-SHA256 with a key of the
// process) so that a tampered state is refused with -32602. A retry
// missing an answer is asked again; an answer that is not a result
// object is -32602.

// mrtrState is what a fixture's requestState carries.
type mrtrState struct {
	Tool  string          `json:"tool"`
	Round int             `json:"round"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// stateKey signs the fixtures' requestState.
var stateKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

func signState(st mrtrState) string {
	payload, _ := json.Marshal(st)
	mac := hmac.New(sha256.New, stateKey)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verifyState decodes a requestState signed by signState for tool.
func verifyState(s, tool string) (mrtrState, bool) {
	var st mrtrState
	payloadB64, sigB64, ok := strings.Cut(s, ".")
	if !ok {
		return st, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(payloadB64)
	sig, err2 := base64.RawURLEncoding.DecodeString(sigB64)
	if err1 != nil || err2 != nil {
		return st, false
	}
	mac := hmac.New(sha256.New, stateKey)
	mac.Write(payload)
	if !hmac.Equal(sig, mac.Sum(nil)) || json.Unmarshal(payload, &st) != nil || st.Tool != tool {
		return mrtrState{}, false
	}
	return st, true
}

// mrtrRequest is what an MRTR fixture reads of a request.
type mrtrRequest struct {
	Meta           protocol.Meta   `json:"_meta"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   string          `json:"requestState"`
}

// The input requests the fixtures ask with.
var (
	elicitName = protocol.InputRequest{Method: protocol.MethodElicitationCreate, Params: json.RawMessage(
		`{"mode":"form","message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`)}
	elicitColor = protocol.InputRequest{Method: protocol.MethodElicitationCreate, Params: json.RawMessage(
		`{"mode":"form","message":"Step 2: What is your favorite color?","requestedSchema":{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}}`)}
	elicitConfirm = protocol.InputRequest{Method: protocol.MethodElicitationCreate, Params: json.RawMessage(
		`{"mode":"form","message":"Please confirm","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}`)}
	elicitContext = protocol.InputRequest{Method: protocol.MethodElicitationCreate, Params: json.RawMessage(
		`{"mode":"form","message":"What context should the prompt use?","requestedSchema":{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}}`)}
	sampleCapital = protocol.InputRequest{Method: protocol.MethodSamplingCreateMessage, Params: json.RawMessage(
		`{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"maxTokens":100}`)}
	sampleGreeting = protocol.InputRequest{Method: protocol.MethodSamplingCreateMessage, Params: json.RawMessage(
		`{"messages":[{"role":"user","content":{"type":"text","text":"Generate a greeting"}}],"maxTokens":50}`)}
	listRoots = protocol.InputRequest{Method: protocol.MethodRootsList, Params: json.RawMessage(`{}`)}
)

// mrtrTools are the MRTR fixture tools.
func mrtrTools() []protocol.Tool {
	obj := json.RawMessage(`{"type":"object","properties":{}}`)
	t := func(name, desc string) protocol.Tool {
		return protocol.Tool{Name: name, Description: desc, InputSchema: obj}
	}
	return []protocol.Tool{
		t("test_input_required_result_elicitation", "Asks (input_required) for the user's name, then greets them."),
		t("test_input_required_result_sampling", "Asks (input_required) the client's model the capital of France."),
		t("test_input_required_result_list_roots", "Asks (input_required) for the client's roots."),
		t("test_input_required_result_request_state", "Asks for a confirmation with a signed requestState; answers state-ok."),
		t("test_input_required_result_multiple_inputs", "Asks for a name, a sampled greeting and the roots at once."),
		t("test_input_required_result_multi_round", "Asks for a name, then a color (two rounds, the state evolving)."),
		t("test_input_required_result_tampered_state", "Asks with a signed requestState and refuses a tampered one."),
		t("test_input_required_result_capabilities", "Asks only for the input the client declared capabilities for."),
	}
}

const mrtrPrompt = "test_input_required_result_prompt"

// inputRequired answers with an InputRequiredResult.
func inputRequired(w mcpserver.ResponseWriter, reqs protocol.InputRequests, state string) {
	w.Reply(protocol.InputRequiredResult{ResultType: protocol.ResultInputRequired, InputRequests: reqs, RequestState: state})
}

// mrtrCall runs an MRTR fixture tool (or, with prompt set, the prompt);
// it reports false for other names.
func (s *server) mrtrCall(w mcpserver.ResponseWriter, r *mcpserver.Request, name string) bool {
	if !strings.HasPrefix(name, "test_input_required_result_") {
		return false
	}
	if !r.Modern() {
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "%s answers with input_required, which needs protocol version %s", name, protocol.Version20260728))
		return true
	}
	var p mrtrRequest
	_ = json.Unmarshal(r.Params, &p)
	answers, perr := protocol.ParseInputResponses(p.InputResponses)
	if perr != nil {
		w.Error(perr)
		return true
	}
	text := func(t string) {
		w.Reply(protocol.CallToolResult{ResultType: protocol.ResultComplete, Content: []protocol.Content{protocol.TextContent(t)}})
	}
	// ask answers with input_required for the keys of want not answered.
	ask := func(want protocol.InputRequests, state string) bool {
		missing := protocol.InputRequests{}
		for k, r := range want {
			if _, ok := answers[k]; !ok {
				missing[k] = r
			}
		}
		if len(missing) == 0 {
			return false
		}
		inputRequired(w, missing, state)
		return true
	}
	// state checks the requestState of a retry; false means answered.
	state := func(tool string) (mrtrState, bool) {
		if p.RequestState == "" {
			return mrtrState{Tool: tool}, true
		}
		st, ok := verifyState(p.RequestState, tool)
		if !ok {
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "requestState failed its integrity check"))
			return st, false
		}
		return st, true
	}
	switch name {
	case "test_input_required_result_elicitation":
		if !ask(protocol.InputRequests{"user_name": elicitName}, "") {
			text("Hello, " + elicitedField(answers["user_name"], "name") + "!")
		}
	case "test_input_required_result_sampling":
		if !ask(protocol.InputRequests{"capital_question": sampleCapital}, "") {
			text("The model said: " + sampledText(answers["capital_question"]))
		}
	case "test_input_required_result_list_roots":
		if !ask(protocol.InputRequests{"client_roots": listRoots}, "") {
			text("Roots: " + rootURIs(answers["client_roots"]))
		}
	case "test_input_required_result_request_state", "test_input_required_result_tampered_state":
		st, ok := state(name)
		if !ok {
			return true
		}
		if st.Round == 0 {
			inputRequired(w, protocol.InputRequests{"confirm": elicitConfirm}, signState(mrtrState{Tool: name, Round: 1}))
			return true
		}
		if !ask(protocol.InputRequests{"confirm": elicitConfirm}, p.RequestState) {
			text("state-ok: confirmed " + elicitedField(answers["confirm"], "ok"))
		}
	case "test_input_required_result_multiple_inputs":
		st, ok := state(name)
		if !ok {
			return true
		}
		next := signState(mrtrState{Tool: name, Round: st.Round + 1})
		if !ask(protocol.InputRequests{"user_name": elicitName, "greeting": sampleGreeting, "client_roots": listRoots}, next) {
			text("Hello " + elicitedField(answers["user_name"], "name") + ": " + sampledText(answers["greeting"]) + " (roots: " + rootURIs(answers["client_roots"]) + ")")
		}
	case "test_input_required_result_multi_round":
		st, ok := state(name)
		if !ok {
			return true
		}
		switch {
		case st.Round == 0 || (st.Round == 1 && answers["step1"] == nil):
			inputRequired(w, protocol.InputRequests{"step1": elicitName}, signState(mrtrState{Tool: name, Round: 1}))
		case st.Round == 1:
			data, _ := json.Marshal(elicitedField(answers["step1"], "name"))
			inputRequired(w, protocol.InputRequests{"step2": elicitColor}, signState(mrtrState{Tool: name, Round: 2, Data: data}))
		case answers["step2"] == nil:
			inputRequired(w, protocol.InputRequests{"step2": elicitColor}, p.RequestState)
		default:
			var who string
			_ = json.Unmarshal(st.Data, &who)
			text(who + " likes " + elicitedField(answers["step2"], "color"))
		}
	case "test_input_required_result_capabilities":
		var caps protocol.ClientCapabilities
		p.Meta.Get(protocol.MetaClientCapabilities, &caps)
		want := protocol.InputRequests{}
		if caps.Sampling != nil {
			want["capital_question"] = sampleCapital
		}
		if caps.Elicitation != nil {
			want["user_name"] = elicitName
		}
		if len(want) == 0 {
			missing(w, protocol.ClientCapabilities{Sampling: &emptyObject})
			return true
		}
		if !ask(want, "") {
			text("Thanks for the input you could give.")
		}
	default:
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "unknown tool %q", name))
	}
	return true
}

// mrtrPromptGet renders the MRTR fixture prompt; it reports false for
// other prompts.
func (s *server) mrtrPromptGet(w mcpserver.ResponseWriter, r *mcpserver.Request) bool {
	var p struct {
		Name string `json:"name"`
		mrtrRequest
	}
	_ = json.Unmarshal(r.Params, &p)
	if p.Name != mrtrPrompt {
		return false
	}
	answers, perr := protocol.ParseInputResponses(p.InputResponses)
	if perr != nil {
		w.Error(perr)
		return true
	}
	if answers["user_context"] == nil {
		inputRequired(w, protocol.InputRequests{"user_context": elicitContext}, "")
		return true
	}
	w.Reply(protocol.GetPromptResult{ResultType: protocol.ResultComplete, Messages: []protocol.PromptMessage{
		{Role: "user", Content: protocol.TextContent("Use this context: " + elicitedField(answers["user_context"], "context"))},
	}})
	return true
}

var emptyObject = json.RawMessage(`{}`)

// missing answers CodeMissingRequiredClientCapability naming caps.
func missing(w mcpserver.ResponseWriter, caps protocol.ClientCapabilities) {
	data, _ := json.Marshal(protocol.MissingCapabilityData{RequiredCapabilities: caps})
	w.Error(&protocol.Error{Code: protocol.CodeMissingRequiredClientCapability, Message: "the request needs a client capability that was not declared", Data: data})
}

// elicitedField returns field of an accepted ElicitResult's content, as
// text ("" when absent).
func elicitedField(raw json.RawMessage, field string) string {
	var r struct {
		Content map[string]json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &r)
	v := r.Content[field]
	var str string
	if json.Unmarshal(v, &str) == nil {
		return str
	}
	return string(v)
}

// sampledText returns the text of a CreateMessageResult.
func sampledText(raw json.RawMessage) string {
	var r struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.Content.Text
}

// rootURIs returns the URIs of a ListRootsResult, joined.
func rootURIs(raw json.RawMessage) string {
	var r protocol.ListRootsResult
	_ = json.Unmarshal(raw, &r)
	uris := make([]string, 0, len(r.Roots))
	for _, root := range r.Roots {
		uris = append(uris, root.URI)
	}
	return strings.Join(uris, ", ")
}
