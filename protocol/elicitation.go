package protocol

import (
	"encoding/json"
	"fmt"
)

// ElicitParams is the params of elicitation/create. Mode is "form" (or
// empty, before 2025-11-25) with a RequestedSchema, or "url" with a URL
// the user must visit.
type ElicitParams struct {
	Meta            Meta            `json:"_meta,omitempty"`
	Mode            string          `json:"mode,omitempty"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
}

// ElicitResult is the answer to elicitation/create: Action is "accept"
// (with Content, for a form), "decline" or "cancel".
type ElicitResult struct {
	Meta    Meta                       `json:"_meta,omitempty"`
	Action  string                     `json:"action"`
	Content map[string]json.RawMessage `json:"content,omitempty"`
}

// The elicitation actions.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// ElicitationDefaults returns the content a form elicitation gets when the
// user accepts it without changing anything: every property of the
// requested schema that declares a default, with the default's exact JSON
// value (SEP-1034). Properties without a default are left out.
func ElicitationDefaults(requestedSchema json.RawMessage) (map[string]json.RawMessage, error) {
	var schema struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if len(requestedSchema) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if err := json.Unmarshal(requestedSchema, &schema); err != nil {
		return nil, fmt.Errorf("requestedSchema: %w", err)
	}
	content := make(map[string]json.RawMessage, len(schema.Properties))
	for name, prop := range schema.Properties {
		if len(prop.Default) > 0 && string(prop.Default) != "null" {
			content[name] = prop.Default
		}
	}
	return content, nil
}
