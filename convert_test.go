package mcpvisor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/session"
)

// exportedFields lists the exported field names of struct type t.
func exportedFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.IsExported() {
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return out
}

// The host's types and the actors' plain inputs and snapshots have the
// same fields, so that a field added on one side and not converted in
// convert.go is caught here rather than silently dropped.
func TestHostTypesMatchTheActorsTypes(t *testing.T) {
	assert.Equal(t, []string{actors.TrustTrusted, actors.TrustUntrusted, actors.TrustSandbox},
		[]string{TrustTrusted, TrustUntrusted, TrustSandbox}, "the trust levels")

	// ServerConfig: the actors' fields, and Nodes, which only package
	// cluster reads (cluster.Member.SetServers).
	cfgFields := append(exportedFields(reflect.TypeOf(actors.ServerConfig{})), "Nodes")
	slices.Sort(cfgFields)
	assert.Equal(t, cfgFields, exportedFields(reflect.TypeOf(ServerConfig{})), "ServerConfig: actors.ServerConfig and Nodes")
	for _, pair := range [][2]any{
		{ReconnectPolicy{}, actors.ReconnectPolicy{}},
		{Options{}, actors.Options{}},
		{BuiltinTool{}, actors.BuiltinTool{}},
		{Tool{}, actors.Tool{}},
		{Resource{}, actors.Resource{}},
		{ResourceTemplate{}, actors.ResourceTemplate{}},
		{Prompt{}, actors.Prompt{}},
		{SetResult{}, actors.SetResult{}},
		{LatencyStats{}, actors.LatencyStats{}},
		{ListDiff{}, actors.ListDiff{}},
		{Collision{}, actors.Collision{}},
		{ToolChange{}, actors.ToolChange{}},
		{PinOptions{}, actors.PinOptions{}},
		{ListError{}, actors.ListError{}},
		{PermissionRules{}, actors.PermissionRules{}},
		{CallApproval{}, actors.CallApproval{}},
		{TimeoutError{}, session.TimeoutError{}},
		{InputError{}, session.InputError{}},
	} {
		host, plain := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		assert.Equal(t, exportedFields(plain), exportedFields(host), "%s and %s", host, plain)
	}

	// Every member of the actors' event is in some typed event.
	var union []string
	for _, ev := range []any{ServerStateEvent{}, ServerToggledEvent{}, ToolsChangedEvent{}, ListChangedEvent{},
		ResourceUpdatedEvent{}, LogMessageEvent{}, ProgressEvent{}, ChannelMessageEvent{}, PermissionEvent{},
		PollChangedEvent{}, TaskStatusEvent{}, ToolDefinitionChangedEvent{}, CollisionEvent{}, AuthRequiredEvent{},
		ListFailedEvent{}, GapEvent{}, EventHeader{}} {
		union = append(union, exportedFields(reflect.TypeOf(ev))...)
	}
	for _, f := range exportedFields(reflect.TypeOf(actors.Event{})) {
		assert.Contains(t, union, f, "actors.Event.%s has no typed event", f)
	}

	// The server status: every snapshot field, under its name or renamed.
	renamed := map[string]string{"Tools": "ToolCount"}
	hostStatus := exportedFields(reflect.TypeOf(ServerStatus{}))
	for _, f := range exportedFields(reflect.TypeOf(actors.ServerStatus{})) {
		if r, ok := renamed[f]; ok {
			f = r
		}
		assert.Contains(t, hostStatus, f, "actors.ServerStatus.%s is not in ServerStatus", f)
	}
}

// The root package declares no alias types: every type a host meets is
// either declared here, with its fields and docs in go doc, or named
// directly from the small public package that owns it (protocol,
// transports, oauth, channels, sandbox).
func TestRootDeclaresNoAliasTypes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var aliases []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				if ts := spec.(*ast.TypeSpec); ts.Assign.IsValid() {
					aliases = append(aliases, fset.Position(ts.Pos()).String()+": "+ts.Name.Name)
				}
			}
		}
	}
	assert.Empty(t, aliases, "alias types in the root package")
}
