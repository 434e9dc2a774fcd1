package management

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/mgmtscript"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// sdkShape is a management tool that follows the SDK: the names of the
// declarations of its input and output, and the Go type of its output.
type sdkShape struct {
	tool          string
	input, output string
	goOutput      reflect.Type
}

// sdkShapes names, for each management tool that follows the Claude
// Agent SDK, the declarations of its input and output in sdk-tools.d.ts
// and the Go type its output is written from. ListMcpResourceTemplates
// and connect_mcp are mcpvisor's own: the SDK declares nothing for them.
var sdkShapes = []sdkShape{
	{ToolListMcpResources, "ListMcpResourcesInput", "ListMcpResourcesOutput", reflect.TypeFor[[]resourceItem]()},
	{ToolReadMcpResource, "ReadMcpResourceInput", "ReadMcpResourceOutput", reflect.TypeFor[readOutput]()},
	{ToolSubscribeMcpResource, "SubscribeMcpResourceInput", "SubscribeMcpResourceOutput", reflect.TypeFor[subscribeOutput]()},
	{ToolUnsubscribeMcpResource, "UnsubscribeMcpResourceInput", "UnsubscribeMcpResourceOutput", reflect.TypeFor[unsubscribeOutput]()},
	{ToolSubscribePolling, "SubscribePollingInput", "SubscribePollingOutput", reflect.TypeFor[subscribeOutput]()},
	{ToolUnsubscribePolling, "UnsubscribePollingInput", "UnsubscribePollingOutput", reflect.TypeFor[unsubscribeOutput]()},
}

// notProduced are the optional members of the SDK's outputs that the
// tools never write, with why. Every other member the SDK declares must be
// in the tools' output types (so that a renamed optional member is caught,
// not taken for a missing one plus an extra one).
var notProduced = map[string]string{
	"ReadMcpResourceOutput.contents[].blobSavedTo": "a blob is described in text (its size), never saved to a file",
}

// sdkDeclarations returns the declarations of sdkShapes, read from the
// SDK's sdk-tools.d.ts (src).
func sdkDeclarations(src string) (map[string]tsType, error) {
	var names []string
	for _, s := range sdkShapes {
		names = append(names, s.input, s.output)
	}
	return parseSDKTools(src, names...)
}

// sdkToolsSource returns the text of the published SDK's sdk-tools.d.ts,
// from the file MCPVISOR_AGENT_SDK_TOOLS names (make npm-deps installs the
// pinned @anthropic-ai/claude-agent-sdk; TEST_ENV sets the variable). A
// missing file fails the test under MCPVISOR_REQUIRE_INTEROP, as in make
// test, and skips it otherwise.
func sdkToolsSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MCPVISOR_AGENT_SDK_TOOLS")
	if path != "" {
		data, err := os.ReadFile(path)
		require.NoError(t, err, "MCPVISOR_AGENT_SDK_TOOLS")
		return string(data)
	}
	msg := "MCPVISOR_AGENT_SDK_TOOLS does not name the Claude Agent SDK's sdk-tools.d.ts (make npm-deps installs it)"
	interop.Missing(t, msg)
	return ""
}

// The management tools take and return the shapes that the published
// Claude Agent SDK declares in sdk-tools.d.ts: each SDK member is in the
// tool's input schema with a compatible type and the same required-ness
// (the schema may add optional members), each member of the SDK's output
// is in the Go type the output is written from (required ones always
// written), and the outputs the tools give through the management script,
// on a real supervisor and mock server, conform to the SDK's output types.
func TestManagementToolShapes(t *testing.T) {
	decls, err := sdkDeclarations(sdkToolsSource(t))
	require.NoError(t, err)
	defs := map[string]protocol.Tool{}
	for _, d := range Definitions() {
		defs[d.Name] = d
	}
	for _, s := range sdkShapes {
		d, ok := defs[s.tool]
		require.True(t, ok, "no definition of %s", s.tool)
		var schema any
		require.NoError(t, json.Unmarshal(d.InputSchema, &schema), s.tool)
		assert.Empty(t, schemaProblems(s.input, decls[s.input], schema), "%s's input schema against the SDK's %s", s.tool, s.input)
		assert.Empty(t, goTypeProblems(s.output, decls[s.output], s.goOutput), "%s's output type against the SDK's %s", s.tool, s.output)
	}

	sup := managedSupervisor(t)
	steps, err := mgmtscript.Load("..")
	require.NoError(t, err)
	answered := map[string]int{}
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		res, err := sup.CallTool(ctx, step.Tool, step.Args)
		cancel()
		require.NoError(t, err, step.Tool)
		a, err := mgmtscript.Record(step, res)
		require.NoError(t, err)
		i := slices.IndexFunc(sdkShapes, func(s sdkShape) bool { return s.tool == step.Tool })
		if a.IsError || i < 0 {
			continue
		}
		var out any
		require.NoError(t, json.Unmarshal(a.Output, &out))
		name := sdkShapes[i].output
		assert.Empty(t, valueProblems(name, decls[name], out), "%s %s: the output against the SDK's %s", step.Tool, step.Args, name)
		answered[step.Tool]++
	}
	for _, s := range sdkShapes {
		assert.Positive(t, answered[s.tool], "the management script has no call of %s that succeeds", s.tool)
	}
}

// The checks see a member the SDK renamed (or the tools did): the same
// definitions and types, against a copy of sdk-tools.d.ts with one input
// member and one output member renamed, have problems that name them.
func TestManagementToolShapesSeeARename(t *testing.T) {
	src := sdkToolsSource(t)
	for _, c := range []struct{ from, to, tool, want string }{
		{"intervalMs: number;", "intervalMillis: number;", ToolSubscribePolling, "SubscribePollingInput: no member intervalMillis"},
		{"subscriptionId: string;", "subscriptionID: string;", ToolSubscribeMcpResource, "SubscribeMcpResourceOutput: no member subscriptionID"},
		{"mimeType?: string;", "mimetype?: string;", ToolListMcpResources, "ListMcpResourcesOutput[]: no member mimetype"},
	} {
		require.Contains(t, src, c.from)
		decls, err := sdkDeclarations(strings.ReplaceAll(src, c.from, c.to))
		require.NoError(t, err)
		var problems []string
		for _, s := range sdkShapes {
			if s.tool != c.tool {
				continue
			}
			var schema any
			for _, d := range Definitions() {
				if d.Name == s.tool {
					require.NoError(t, json.Unmarshal(d.InputSchema, &schema))
				}
			}
			problems = append(problems, schemaProblems(s.input, decls[s.input], schema)...)
			problems = append(problems, goTypeProblems(s.output, decls[s.output], s.goOutput)...)
		}
		assert.NotEmpty(t, problems, "%s renamed to %s", c.from, c.to)
		assert.Contains(t, strings.Join(problems, "\n"), c.want)
	}
}

// The reader of sdk-tools.d.ts understands its subset and refuses the
// rest.
func TestSDKToolsParser(t *testing.T) {
	src := `/* eslint-disable */
export type Ignored = Something<Else>;
/** doc */
export interface In {
  /** the server */
  server: string;
  kind?: "a" | 'b';
  args?: {
    [k: string]: unknown;
  };
  n: number;
}
export type Out = {
  ok: boolean; // trailing
  items: { uri: string; tags?: string[] }[];
}[];
export interface Bad { v: number | string; }
export interface Generic { v: Record<string, unknown>; }
`
	got, err := parseSDKTools(src, "In", "Out")
	require.NoError(t, err)
	assert.Equal(t, `{ server: string; kind?: "a" | "b"; args?: { [k: string]: unknown; }; n: number; }`, got["In"].String())
	assert.Equal(t, `{ ok: boolean; items: { uri: string; tags?: string[]; }[]; }[]`, got["Out"].String())

	_, err = parseSDKTools(src, "Missing")
	assert.ErrorContains(t, err, "declares no Missing")
	_, err = parseSDKTools(src, "Bad")
	assert.ErrorContains(t, err, "only unions of string literals")
	_, err = parseSDKTools(src, "Generic")
	assert.ErrorContains(t, err, `"Record" is not understood`)
	_, err = parseSDKTools(`export interface Open { a: string;`, "Open")
	assert.Error(t, err)
}

// schemaProblems compares a JSON Schema (decoded) with the SDK's type
// want; path names the place in messages.
func schemaProblems(path string, want tsType, schema any) []string {
	s, _ := schema.(map[string]any)
	typ, _ := s["type"].(string)
	var out []string
	bad := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	switch want.Kind {
	case "unknown":
	case "string", "boolean", "array", "object":
		if typ != want.Kind {
			bad("the schema's type is %q, the SDK's %s", typ, want)
			return out
		}
	case "number":
		if typ != "number" && typ != "integer" {
			bad("the schema's type is %q, the SDK's %s", typ, want)
			return out
		}
	}
	switch want.Kind {
	case "string":
		if len(want.Enum) > 0 {
			var enum []string
			list, _ := s["enum"].([]any)
			for _, v := range list {
				str, _ := v.(string)
				enum = append(enum, str)
			}
			if !sameSet(enum, want.Enum) {
				bad("the schema's values are %q, the SDK's %q", enum, want.Enum)
			}
		}
	case "array":
		out = append(out, schemaProblems(path+"[]", *want.Elem, s["items"])...)
	case "object":
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		list, _ := s["required"].([]any)
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
		declared := map[string]bool{}
		for _, m := range want.Members {
			declared[m.Name] = true
			p, ok := props[m.Name]
			if !ok {
				bad("no member %s (the SDK's %s)", m.Name, m.Type)
				continue
			}
			if required[m.Name] == m.Optional {
				bad("%s is required %v in the schema, %v in the SDK", m.Name, required[m.Name], !m.Optional)
			}
			out = append(out, schemaProblems(path+"."+m.Name, m.Type, p)...)
		}
		for _, name := range sortedKeys(props) {
			if !declared[name] && required[name] {
				bad("%s, which the SDK does not declare, is required", name)
			}
		}
		if ap, ok := s["additionalProperties"].(bool); want.Index && ok && !ap {
			bad("the SDK takes any member, the schema no additional one")
		}
	}
	return out
}

// goTypeProblems compares the Go type an output is written from (with
// encoding/json) with the SDK's type want.
func goTypeProblems(path string, want tsType, t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	bad := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	switch want.Kind {
	case "unknown":
	case "string":
		if t.Kind() != reflect.String {
			bad("written from %s, the SDK's %s", t, want)
		}
	case "number":
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		default:
			bad("written from %s, the SDK's %s", t, want)
		}
	case "boolean":
		if t.Kind() != reflect.Bool {
			bad("written from %s, the SDK's %s", t, want)
		}
	case "array":
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			bad("written from %s, the SDK's %s", t, want)
			break
		}
		out = append(out, goTypeProblems(path+"[]", *want.Elem, t.Elem())...)
	case "object":
		if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Map {
			if !want.Index {
				bad("written from %s, which declares no members; the SDK's %s", t, want)
			}
			break
		}
		if t.Kind() != reflect.Struct {
			bad("written from %s, the SDK's %s", t, want)
			break
		}
		fields := jsonFields(t)
		declared := map[string]bool{}
		for _, m := range want.Members {
			declared[m.Name] = true
			f, ok := fields[m.Name]
			switch {
			case !ok && m.Optional && notProduced[path+"."+m.Name] != "":
			case !ok:
				bad("no member %s (the SDK's %s)", m.Name, m.Type)
			case !m.Optional && (f.omitempty || f.typ.Kind() == reflect.Pointer):
				bad("%s is required in the SDK but may be left out or null", m.Name)
			default:
				out = append(out, goTypeProblems(path+"."+m.Name, m.Type, f.typ)...)
			}
		}
		for _, name := range sortedKeys(fields) {
			if !declared[name] && !fields[name].omitempty {
				bad("%s, which the SDK does not declare, is always written (extra members must be optional)", name)
			}
		}
	}
	return out
}

// jsonField is a struct field as encoding/json writes it.
type jsonField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields returns the members encoding/json writes for struct type t.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitempty: strings.Contains(","+opts+",", ",omitempty,")}
	}
	return out
}

// valueProblems compares a decoded JSON value with the SDK's type want:
// every required member present (not null), every present member of its
// type; members the SDK does not declare are allowed.
func valueProblems(path string, want tsType, v any) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	switch want.Kind {
	case "unknown":
	case "string":
		s, ok := v.(string)
		if !ok {
			bad("%v is not a string", v)
		} else if len(want.Enum) > 0 && !slices.Contains(want.Enum, s) {
			bad("%q is none of %q", s, want.Enum)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			bad("%v is not a number", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("%v is not a boolean", v)
		}
	case "array":
		list, ok := v.([]any)
		if !ok {
			bad("%v is not an array", v)
			break
		}
		for i, e := range list {
			out = append(out, valueProblems(fmt.Sprintf("%s[%d]", path, i), *want.Elem, e)...)
		}
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			bad("%v is not an object", v)
			break
		}
		for _, m := range want.Members {
			mv, ok := obj[m.Name]
			if !ok || mv == nil {
				if !m.Optional {
					bad("no member %s", m.Name)
				}
				continue
			}
			out = append(out, valueProblems(path+"."+m.Name, m.Type, mv)...)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
