package config

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/trust"
)

// launchProject is a project directory whose config a test rewrites,
// loaded with approvals kept in a real trust.Store.
type launchProject struct {
	dir   string
	home  string
	env   map[string]string
	store *trust.Store
}

func newLaunchProject(t *testing.T) *launchProject {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return &launchProject{dir: dir, home: t.TempDir(), env: map[string]string{}, store: trust.NewStore(t.TempDir(), nil)}
}

func (lp *launchProject) load(t *testing.T) *Config {
	t.Helper()
	cfg, err := Load(Options{Home: lp.home, Dir: lp.dir, ManagedFile: noManaged(t),
		LookupEnv: fakeEnv(lp.env), Approvals: lp.store})
	require.NoError(t, err)
	require.Empty(t, cfg.Skipped)
	return cfg
}

// approve approves the held server name as the CLI does.
func (lp *launchProject) approve(t *testing.T, name string) {
	t.Helper()
	cfg := lp.load(t)
	require.Contains(t, cfg.Pending, name)
	a, err := cfg.Approval(name)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, lp.store.Approve(ctx, a))
	cfg = lp.load(t)
	require.NotContains(t, cfg.Pending, name, "approved: it runs")
}

// heldFor asserts that server name is held again because what it launches
// changed, and that the difference names member.
func heldFor(t *testing.T, cfg *Config, name, member string) {
	t.Helper()
	require.Contains(t, cfg.Pending, name, "what it launches changed: it asks again")
	p := cfg.Pending[name]
	assert.True(t, p.Changed)
	assert.NotEmpty(t, cfg.Servers[name].NeedsApproval)
	assert.Empty(t, cfg.Servers[name].Command, "a held entry carries nothing that would start")
	assert.Contains(t, strings.Join(p.LaunchChanges, "\n"), member, "the difference is shown")
	assert.Contains(t, p.Reason, "what it launches differs")
}

// (a) The file's top-level "sandbox" is part of what runs: turning it off
// or opening the network after approval asks again.
func TestTheFileSandboxDefaultIsCoveredByTheApproval(t *testing.T) {
	for name, tc := range map[string]struct{ then, member string }{
		"sandbox false":   {`false`, "sandbox.enabled: true → false"},
		"network true":    {`{"write": ["./out"], "network": true}`, "sandbox.network: false → true"},
		"another write":   {`{"write": ["./elsewhere"]}`, "sandbox.write[0]"},
		"sandbox removed": {``, "sandbox: set → none"},
	} {
		t.Run(name, func(t *testing.T) {
			lp := newLaunchProject(t)
			writeFile(t, lp.dir, ".mcp.json", `{"sandbox": {"write": ["./out"]}, "mcpServers": {"s": {"command": "srv"}}}`)
			p := lp.load(t).Pending["s"]
			require.NotNil(t, p.Sandbox, "shown with the file's sandbox")
			assert.Equal(t, []string{"./out"}, p.Sandbox.Write)
			lp.approve(t, "s")
			sb := lp.load(t).Servers["s"].Sandbox
			require.NotNil(t, sb)
			assert.True(t, sb.Enabled)
			assert.Equal(t, []string{filepath.Join(lp.dir, "out")}, sb.Write)

			top := ""
			if tc.then != "" {
				top = `"sandbox": ` + tc.then + `, `
			}
			writeFile(t, lp.dir, ".mcp.json", `{`+top+`"mcpServers": {"s": {"command": "srv"}}}`)
			heldFor(t, lp.load(t), "s", tc.member)
		})
	}
}

// (b) Sandbox paths and the working directory are resolved to real paths
// when approved, the server gets those, and a path that resolves
// elsewhere later (a link put in its place) asks again.
func TestSandboxPathsAndCwdArePinnedAsRealPaths(t *testing.T) {
	for _, member := range []string{"write", "read", "cwd"} {
		t.Run(member, func(t *testing.T) {
			lp := newLaunchProject(t)
			elsewhere, err := filepath.EvalSymlinks(t.TempDir())
			require.NoError(t, err)
			target := filepath.Join(lp.dir, "real-"+member)
			require.NoError(t, os.Mkdir(target, 0o700))
			require.NoError(t, os.Symlink(target, filepath.Join(lp.dir, "p")))
			entry := `{"command": "srv", "sandbox": {"` + member + `": ["${workspaceFolder}/p"]}}`
			if member == "cwd" {
				entry = `{"command": "srv", "cwd": "${workspaceFolder}/p", "sandbox": true}`
			}
			writeFile(t, lp.dir, ".mcp.json", `{"mcpServers": {"s": `+entry+`}}`)
			lp.approve(t, "s")

			sc := lp.load(t).Servers["s"]
			got := map[string]string{"write": "", "read": "", "cwd": sc.Cwd}
			if len(sc.Sandbox.Write) > 0 {
				got["write"] = sc.Sandbox.Write[0]
			}
			if len(sc.Sandbox.Read) > 0 {
				got["read"] = sc.Sandbox.Read[0]
			}
			assert.Equal(t, target, got[member], "the server gets the path as resolved when approved")

			// The link now points into the home.
			require.NoError(t, os.Remove(filepath.Join(lp.dir, "p")))
			require.NoError(t, os.Symlink(elsewhere, filepath.Join(lp.dir, "p")))
			cfg := lp.load(t)
			key := "sandbox." + member + "[0]"
			if member == "cwd" {
				key = "cwd"
			}
			heldFor(t, cfg, "s", key+": "+target+" → "+elsewhere)
		})
	}
}

// (c) An envFile whose path needs a variable other than
// ${workspaceFolder}: its content is covered once approved, so an edit
// (LD_PRELOAD) asks again.
func TestAnEnvFileAnywhereIsCoveredByTheApproval(t *testing.T) {
	lp := newLaunchProject(t)
	envDir := t.TempDir()
	lp.env["ENVDIR"] = envDir
	writeFile(t, envDir, "app.env", "API_URL=https://api.example.com\n")
	writeFile(t, lp.dir, ".mcp.json", `{"mcpServers": {"s": {"command": "srv", "envFile": "${ENVDIR}/app.env"}}}`)
	cfg := lp.load(t)
	assert.Empty(t, cfg.Pending["s"].EnvFile, "not resolvable before approval: nothing read")
	lp.approve(t, "s")
	assert.Equal(t, "https://api.example.com", lp.load(t).Servers["s"].Env["API_URL"])

	writeFile(t, envDir, "app.env", "API_URL=https://api.example.com\nLD_PRELOAD=/tmp/evil.so\n")
	cfg = lp.load(t)
	heldFor(t, cfg, "s", `env["LD_PRELOAD"]: added`)
	assert.NotContains(t, strings.Join(cfg.Pending["s"].LaunchChanges, "\n"), "evil", "values show as digests")
	assert.Empty(t, cfg.Servers["s"].Env)

	// Approving approves the launch shown, not one changed since.
	writeFile(t, envDir, "app.env", "API_URL=https://api.example.com\nLD_PRELOAD=/tmp/other.so\n")
	_, err := cfg.Approval("s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed again since it was shown")
	writeFile(t, envDir, "app.env", "API_URL=https://api.example.com\nLD_PRELOAD=/tmp/evil.so\n")
	_, err = cfg.Approval("s")
	require.NoError(t, err, "the launch shown")

	// An expanded variable is part of the launch too.
	writeFile(t, envDir, "app.env", "API_URL=https://api.example.com\n")
	assert.NotContains(t, lp.load(t).Pending, "s", "back to what was approved")
	lp.env["ENVDIR"] = t.TempDir()
	writeFile(t, lp.env["ENVDIR"], "app.env", "API_URL=https://api.example.com\n")
	heldFor(t, lp.load(t), "s", "envFile: ")
}

// An approval recorded before launches were covered approves no launch.
func TestAnApprovalWithoutALaunchAsksAgain(t *testing.T) {
	lp := newLaunchProject(t)
	writeFile(t, lp.dir, ".mcp.json", `{"mcpServers": {"s": {"command": "srv"}}}`)
	p := lp.load(t).Pending["s"]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, lp.store.Approve(ctx, trust.Approval{Project: p.Project, Server: "s", Hash: p.Hash, Entry: p.Entry}))
	heldFor(t, lp.load(t), "s", "predates")
}

// Approval refuses an entry that changed since it was shown, and one
// that does not wait.
func TestApprovalIsOfTheEntryShown(t *testing.T) {
	lp := newLaunchProject(t)
	writeFile(t, lp.dir, ".mcp.json", `{"mcpServers": {"s": {"command": "srv"}}}`)
	cfg := lp.load(t)
	writeFile(t, lp.dir, ".mcp.json", `{"mcpServers": {"s": {"command": "srv", "args": ["--evil"]}}}`)
	_, err := cfg.Approval("s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed since it was shown")
	_, err = cfg.Approval("nope")
	assert.ErrorIs(t, err, ErrNotPending)
}

// Every member of the config the launcher consumes is part of the launch:
// the cases come from mcpvisor.ServerConfig's type, so a member added later is
// covered, or this test fails.
func TestEveryMemberOfTheLaunchIsCovered(t *testing.T) {
	typ := reflect.TypeFor[mcpvisor.ServerConfig]()
	var base mcpvisor.ServerConfig
	fillLaunch(t, reflect.ValueOf(&base).Elem())
	want := launchOf(base, "/usr/bin/srv").Digest

	paths := leafPaths(typ, nil)
	require.Greater(t, len(paths), 30, "the walk reaches the members")
	skipped := 0
	for _, idx := range paths {
		name := fieldName(typ, idx)
		var mut mcpvisor.ServerConfig
		fillLaunch(t, reflect.ValueOf(&mut).Elem())
		changeLeaf(t, reflect.ValueOf(&mut).Elem(), idx)
		got := launchOf(mut, "/usr/bin/srv").Digest
		if launchSkipped[strings.Split(name, ".")[0]] {
			skipped++
			assert.Equal(t, want, got, "%s never reaches the server", name)
			continue
		}
		assert.NotEqual(t, want, got, "changing %s must ask again", name)
	}
	assert.Equal(t, len(launchSkipped), skipped, "the skipped members exist")
	base.Type = "stdio"
	assert.NotEqual(t, launchOf(base, "/usr/bin/srv").Digest, launchOf(base, "/opt/other/srv").Digest, "the executable found")

	// Empty and none differ.
	var a, b mcpvisor.ServerConfig
	fillLaunch(t, reflect.ValueOf(&a).Elem())
	fillLaunch(t, reflect.ValueOf(&b).Elem())
	b.Args = []string{}
	a.Args = nil
	assert.NotEqual(t, launchOf(a, "").Digest, launchOf(b, "").Digest)
}

// leafPaths lists the field index paths of t's leaves (through
// pointers; slices, maps and raw JSON are leaves of their own).
func leafPaths(t reflect.Type, prefix []int) [][]int {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return [][]int{prefix}
	}
	var out [][]int
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		idx := append(append([]int{}, prefix...), i)
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, leafPaths(f.Type, idx)...)
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, leafPaths(f.Type, idx)...)
			out = append(out, append(idx[:len(idx):len(idx)], -1)) // -1: set to nil
		default:
			out = append(out, idx)
		}
	}
	return out
}

func fieldName(t reflect.Type, idx []int) string {
	var parts []string
	for _, i := range idx {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if i < 0 {
			parts = append(parts, "(nil)")
			break
		}
		f := t.Field(i)
		if !f.Anonymous {
			parts = append(parts, f.Name)
		}
		t = f.Type
	}
	return strings.Join(parts, ".")
}

// fillLaunch gives every leaf of v a value that is not its zero value.
func fillLaunch(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillLaunch(t, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillLaunch(t, v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`{"a":1}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillLaunch(t, s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fillLaunch(t, e)
		m.SetMapIndex(reflect.ValueOf("K").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.String:
		v.SetString("a")
	case reflect.Bool:
		v.SetBool(false)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	default:
		t.Fatalf("a member of kind %s: teach fillLaunch and changeLeaf to change it", v.Kind())
	}
}

// changeLeaf changes the leaf of v at idx (-1: set the pointer to nil).
func changeLeaf(t *testing.T, v reflect.Value, idx []int) {
	t.Helper()
	for _, i := range idx {
		if v.Kind() == reflect.Pointer {
			if i < 0 {
				v.SetZero()
				return
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	switch v.Kind() {
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(json.RawMessage(`{"a":2}`))
			return
		}
		e := reflect.New(v.Type().Elem()).Elem()
		fillLaunch(t, e)
		changeValue(t, e)
		v.Set(reflect.Append(v, e))
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			changeValue(t, e)
			v.SetMapIndex(k, e)
		}
	default:
		changeValue(t, v)
	}
}

func changeValue(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "b")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	default:
		t.Fatalf("a value of kind %s: teach changeValue to change it", v.Kind())
	}
}
