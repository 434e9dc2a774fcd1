package protocol

import "encoding/json"

// The types of the requests a server sends to the client: roots/list and
// sampling/createMessage (elicitation/create is in elicitation.go).

// Root is a directory or file the client exposes to servers.
type Root struct {
	Meta Meta   `json:"_meta,omitempty"`
	URI  string `json:"uri"` // a file:// URI
	Name string `json:"name,omitempty"`
}

// ListRootsResult answers roots/list.
type ListRootsResult struct {
	Meta  Meta   `json:"_meta,omitempty"`
	Roots []Root `json:"roots"`
}

// SamplingMessage is one message of a sampling request. Content is one
// content block, or (2025-11-25) an array of them, kept raw.
type SamplingMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// CreateMessageParams is the params of sampling/createMessage. Members
// this type does not name (tools, toolChoice, …) are kept in Extra.
type CreateMessageParams struct {
	Meta             Meta              `json:"_meta,omitempty"`
	Messages         []SamplingMessage `json:"messages"`
	ModelPreferences json.RawMessage   `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	Metadata         json.RawMessage   `json:"metadata,omitempty"`
	Extra            Extra             `json:"-"`
}

type createMessageParamsAlias CreateMessageParams

// UnmarshalJSON decodes the params, keeping unknown members in Extra.
func (p *CreateMessageParams) UnmarshalJSON(data []byte) error {
	extra, err := decodeWithExtra(data, (*createMessageParamsAlias)(p))
	p.Extra = extra
	return err
}

// CreateMessageResult answers sampling/createMessage.
type CreateMessageResult struct {
	Meta       Meta    `json:"_meta,omitempty"`
	Role       string  `json:"role"`
	Content    Content `json:"content"`
	Model      string  `json:"model"`
	StopReason string  `json:"stopReason,omitempty"`
}

// MetaProgressToken is the _meta key of a request's progress token: the
// server's notifications/progress about the request carry it.
const MetaProgressToken = "progressToken"
