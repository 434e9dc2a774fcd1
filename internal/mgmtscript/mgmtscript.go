// Package mgmtscript runs the management tools' scripted conversation
// (management/testdata/script.json) for the golden tests of the library
// and of the gateway, and renders what the tools answered, so that both
// paths are pinned by the same files: definitions.golden.json (the
// tools' definitions) and answers.golden.json (each step's output).
package mgmtscript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Dir is the directory of the script and the golden files, relative to
// the module's root.
const Dir = "management/testdata"

// Step is one call of the script.
type Step struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Answer is what one step's tool answered: its output (the JSON of its
// text content), or the error text with IsError.
type Answer struct {
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	IsError bool            `json:"isError,omitempty"`
	Output  json.RawMessage `json:"output"`
}

// Load reads the script from root (the module's root directory).
func Load(root string) ([]Step, error) {
	data, err := os.ReadFile(filepath.Join(root, Dir, "script.json"))
	if err != nil {
		return nil, err
	}
	var steps []Step
	if err := json.Unmarshal(data, &steps); err != nil {
		return nil, fmt.Errorf("script.json: %w", err)
	}
	return steps, nil
}

// Record turns a step's result into its Answer. It fails when the result
// breaks the tools' contract: one text content; for an output that is a
// JSON object, structuredContent equal to it.
func Record(step Step, res *protocol.CallToolResult) (Answer, error) {
	if len(res.Content) != 1 || res.Content[0].Type != "text" {
		return Answer{}, fmt.Errorf("%s: want one text content, got %+v", step.Tool, res.Content)
	}
	text := res.Content[0].Text
	a := Answer{Tool: step.Tool, Args: step.Args, IsError: res.IsError}
	if res.IsError {
		a.Output, _ = json.Marshal(text)
		return a, nil
	}
	if !json.Valid([]byte(text)) {
		return Answer{}, fmt.Errorf("%s: output is not JSON: %s", step.Tool, text)
	}
	a.Output = json.RawMessage(text)
	if text[0] == '{' {
		var got, want any
		if err := json.Unmarshal(res.StructuredContent, &got); err != nil {
			return Answer{}, fmt.Errorf("%s: structuredContent: %w", step.Tool, err)
		}
		_ = json.Unmarshal([]byte(text), &want)
		if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
			return Answer{}, fmt.Errorf("%s: structuredContent %s differs from the text %s", step.Tool, g, w)
		}
	} else if len(res.StructuredContent) > 0 {
		return Answer{}, fmt.Errorf("%s: structuredContent beside an output that is not an object", step.Tool)
	}
	return a, nil
}

// Render encodes v as indented JSON with a final newline, as the golden
// files hold it.
func Render(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
