package protocol

// Completion (completion/complete): a server suggests values for an
// argument of one of its prompts or resource templates.

// Completion reference types.
const (
	RefPrompt   = "ref/prompt"
	RefResource = "ref/resource"
)

// CompletionReference names what is completed: a prompt (Type RefPrompt,
// Name) or a resource template (Type RefResource, URI: the template).
type CompletionReference struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// CompletionArgument is the argument being completed and its value so
// far.
type CompletionArgument struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CompletionContext carries the values of the arguments already resolved
// (2025-06-18 and later).
type CompletionContext struct {
	Arguments map[string]string `json:"arguments,omitempty"`
}

// CompleteParams are the params of completion/complete.
type CompleteParams struct {
	Ref      CompletionReference `json:"ref"`
	Argument CompletionArgument  `json:"argument"`
	Context  *CompletionContext  `json:"context,omitempty"`
	Meta     Meta                `json:"_meta,omitempty"`
}

// Completion is a server's suggestions: at most 100 values, the total
// number when known, and whether there are more than those listed.
type Completion struct {
	Values  []string `json:"values"`
	Total   *int     `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// CompleteResult is the result of completion/complete.
type CompleteResult struct {
	Completion Completion `json:"completion"`
	Meta       Meta       `json:"_meta,omitempty"`
}
