package protocol

import "encoding/json"

// Tool is a tool as a server lists it. Members this type does not name are
// kept in Extra and written back on encoding.
type Tool struct {
	Meta         Meta             `json:"_meta,omitempty"`
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Icons        []Icon           `json:"icons,omitempty"`
	Extra        Extra            `json:"-"`
}

type toolAlias Tool

// UnmarshalJSON decodes a tool, keeping unknown members in Extra.
func (t *Tool) UnmarshalJSON(data []byte) error { return t.decodeJSON(data) }

func (t *Tool) decodeJSON(data []byte) error {
	extra, err := decodeWithExtra(data, (*toolAlias)(t))
	t.Extra = extra
	return err
}

// MarshalJSON encodes a tool with its Extra members.
func (t Tool) MarshalJSON() ([]byte, error) {
	if t.InputSchema == nil {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return encodeWithExtra((*toolAlias)(&t), t.Extra)
}

// ToolAnnotations are hints about a tool's behaviour. They come from the
// server and are trustworthy only as far as the server is.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// ListToolsResult is one page of tools/list.
type ListToolsResult struct {
	Meta       Meta   `json:"_meta,omitempty"`
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
	// ResultType, TTLMs and CacheScope are set by 2026-07-28 servers
	// (SEP-2549 caching hints; see CacheHints).
	ResultType string `json:"resultType,omitempty"`
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// CallToolParams is the params of tools/call.
type CallToolParams struct {
	Meta      Meta            `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// InputResponses and RequestState retry a request the server
	// answered with an InputRequiredResult (2026-07-28).
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string          `json:"requestState,omitempty"`
}

// CallToolResult is the result of tools/call. A tool that failed reports
// IsError with the failure in Content; that is a result, not a protocol
// error. Members this type does not name are kept in Extra.
type CallToolResult struct {
	Meta              Meta            `json:"_meta,omitempty"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	// ResultType is "complete" (or empty) for a finished call and
	// "input_required" when a 2026-07-28 server needs more input.
	ResultType string `json:"resultType,omitempty"`
	Extra      Extra  `json:"-"`
}

type callToolResultAlias CallToolResult

// UnmarshalJSON decodes a result, keeping unknown members in Extra.
func (r *CallToolResult) UnmarshalJSON(data []byte) error { return r.decodeJSON(data) }

func (r *CallToolResult) decodeJSON(data []byte) error {
	if r.isZero() {
		var fast CallToolResult
		if scanCallToolResult(data, &fast) {
			*r = fast
			return nil
		}
	}
	extra, err := decodeWithExtra(data, (*callToolResultAlias)(r))
	r.Extra = extra
	return err
}

// isZero reports whether r holds nothing yet: only then may the fast scan
// replace it (encoding/json merges into what a struct already holds).
func (r *CallToolResult) isZero() bool {
	return r.Meta == nil && r.Content == nil && r.StructuredContent == nil && !r.IsError && r.ResultType == "" && r.Extra == nil
}

// MarshalJSON encodes a result with its Extra members. A complete result
// always carries content (an empty array when there is none); an interim
// one (input_required, or a task) carries what it has.
func (r CallToolResult) MarshalJSON() ([]byte, error) {
	if r.Content == nil {
		if r.ResultType != "" && r.ResultType != ResultComplete {
			return encodeWithExtra(&interimCallToolResult{r.Meta, r.StructuredContent, r.IsError, r.ResultType}, r.Extra)
		}
		r.Content = []Content{}
	}
	return encodeWithExtra((*callToolResultAlias)(&r), r.Extra)
}

// interimCallToolResult is a CallToolResult without content: an
// InputRequiredResult or a CreateTaskResult kept as one.
type interimCallToolResult struct {
	Meta              Meta            `json:"_meta,omitempty"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	ResultType        string          `json:"resultType,omitempty"`
}

// Content types.
const (
	ContentText         = "text"
	ContentImage        = "image"
	ContentAudio        = "audio"
	contentResourceLink = "resource_link"
	ContentResource     = "resource"
)

// Content is one block of tool output or prompt message content: text,
// image, audio, a resource link or an embedded resource, told apart by Type.
type Content struct {
	Meta        Meta         `json:"_meta,omitempty"`
	Type        string       `json:"type"`
	Annotations *Annotations `json:"annotations,omitempty"`

	// Text holds the text of a "text" block.
	Text string `json:"text,omitempty"`
	// Data (base64) and MimeType describe an "image" or "audio" block;
	// MimeType also describes a "resource_link".
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`

	// URI, Name, Title, Description, Size and Icons describe a
	// "resource_link" block.
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Size        *int64 `json:"size,omitempty"`
	Icons       []Icon `json:"icons,omitempty"`

	// Resource holds the contents of a "resource" (embedded) block.
	Resource *ResourceContents `json:"resource,omitempty"`
}

type contentAlias Content

// MarshalJSON encodes a content block. A text block always carries its
// text member, even when empty, as the schema requires.
func (c Content) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal((*contentAlias)(&c))
	if err != nil || c.Type != ContentText || c.Text != "" {
		return b, err
	}
	// {"type":"text"...} → insert "text":"" right after the opening brace.
	out := make([]byte, 0, len(b)+10)
	out = append(out, `{"text":""`...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: ContentText, Text: text} }

// Annotations tell a client how to use a content block or resource.
type Annotations struct {
	Audience     []string `json:"audience,omitempty"`
	Priority     *float64 `json:"priority,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
}

// Resource is a resource as a server lists it.
type Resource struct {
	Meta        Meta         `json:"_meta,omitempty"`
	URI         string       `json:"uri"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Size        *int64       `json:"size,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
}

// ResourceTemplate is a parameterized resource (RFC 6570 URI template).
type ResourceTemplate struct {
	Meta        Meta         `json:"_meta,omitempty"`
	URITemplate string       `json:"uriTemplate"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
}

// ResourceContents is the text or the base64 blob of a resource.
type ResourceContents struct {
	Meta     Meta   `json:"_meta,omitempty"`
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// ListResourcesResult is one page of resources/list.
type ListResourcesResult struct {
	Meta       Meta       `json:"_meta,omitempty"`
	Resources  []Resource `json:"resources"`
	NextCursor string     `json:"nextCursor,omitempty"`
	// ResultType, TTLMs and CacheScope are set by 2026-07-28 servers
	// (SEP-2549 caching hints; see CacheHints).
	ResultType string `json:"resultType,omitempty"`
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// ListResourceTemplatesResult is one page of resources/templates/list.
type ListResourceTemplatesResult struct {
	Meta              Meta               `json:"_meta,omitempty"`
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates"`
	NextCursor        string             `json:"nextCursor,omitempty"`
	// ResultType, TTLMs and CacheScope are set by 2026-07-28 servers
	// (SEP-2549 caching hints; see CacheHints).
	ResultType string `json:"resultType,omitempty"`
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// ReadResourceParams is the params of resources/read.
type ReadResourceParams struct {
	Meta Meta   `json:"_meta,omitempty"`
	URI  string `json:"uri"`
	// InputResponses and RequestState retry a request the server
	// answered with an InputRequiredResult (2026-07-28).
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string          `json:"requestState,omitempty"`
}

// ReadResourceResult is the result of resources/read.
type ReadResourceResult struct {
	Meta     Meta               `json:"_meta,omitempty"`
	Contents []ResourceContents `json:"contents"`
	// ResultType, TTLMs and CacheScope are set by 2026-07-28 servers
	// (SEP-2549 caching hints; see CacheHints).
	ResultType string `json:"resultType,omitempty"`
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// SubscribeParams is the params of resources/subscribe and unsubscribe.
type SubscribeParams struct {
	Meta Meta   `json:"_meta,omitempty"`
	URI  string `json:"uri"`
}

// NotificationSubscriptions selects the notifications a 2026-07-28
// subscriptions/listen stream carries (and, in the acknowledgement, the
// subset the server agreed to).
type NotificationSubscriptions struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// IsEmpty reports whether nothing is selected.
func (n NotificationSubscriptions) IsEmpty() bool {
	return !n.ToolsListChanged && !n.PromptsListChanged && !n.ResourcesListChanged && len(n.ResourceSubscriptions) == 0
}

// SubscriptionsListenParams is the params of subscriptions/listen
// (2026-07-28): a long-lived request whose answer stream carries the
// selected notifications, each tagged with
// _meta[MetaSubscriptionID] = the listen request's id.
type SubscriptionsListenParams struct {
	Meta          Meta                      `json:"_meta,omitempty"`
	Notifications NotificationSubscriptions `json:"notifications"`
}

// SubscriptionsAcknowledgedParams is the params of
// notifications/subscriptions/acknowledged, the first message of a listen
// stream.
type SubscriptionsAcknowledgedParams struct {
	Meta          Meta                      `json:"_meta,omitempty"`
	Notifications NotificationSubscriptions `json:"notifications"`
}

// Prompt is a prompt template as a server lists it.
type Prompt struct {
	Meta        Meta             `json:"_meta,omitempty"`
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Icons       []Icon           `json:"icons,omitempty"`
}

// PromptArgument is one argument a prompt accepts.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ListPromptsResult is one page of prompts/list.
type ListPromptsResult struct {
	Meta       Meta     `json:"_meta,omitempty"`
	Prompts    []Prompt `json:"prompts"`
	NextCursor string   `json:"nextCursor,omitempty"`
	// ResultType, TTLMs and CacheScope are set by 2026-07-28 servers
	// (SEP-2549 caching hints; see CacheHints).
	ResultType string `json:"resultType,omitempty"`
	TTLMs      *int64 `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// GetPromptParams is the params of prompts/get.
type GetPromptParams struct {
	Meta      Meta              `json:"_meta,omitempty"`
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
	// InputResponses and RequestState retry a request the server
	// answered with an InputRequiredResult (2026-07-28).
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string          `json:"requestState,omitempty"`
}

// GetPromptResult is the result of prompts/get.
type GetPromptResult struct {
	Meta        Meta            `json:"_meta,omitempty"`
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
	ResultType  string          `json:"resultType,omitempty"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}
