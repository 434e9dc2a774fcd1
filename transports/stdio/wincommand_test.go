package stdio

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Windows lookup runs on every platform: it is string work over the
// server's environment and a file test.
func TestLookWindowsCommand(t *testing.T) {
	files := map[string]bool{
		`C:\Program Files\nodejs\npx.cmd`:  true,
		`C:\Program Files\nodejs\node.exe`: true,
		`C:\Python\python.exe`:             true,
		`C:\Python\python.bat`:             true,
		`C:\tools\server.py`:               true,
		`C:\proj\run.cmd`:                  true,
		`D:\shadow\npx.exe`:                true,
	}
	isFile := func(p string) bool { return files[p] }
	env := []string{
		`Path=C:\Windows;relative\bin;;"C:\Program Files\nodejs";C:\Python\`,
		"PATHEXT=.COM;.EXE;.BAT;.CMD",
	}
	for _, tc := range []struct{ command, want string }{
		{"npx", `C:\Program Files\nodejs\npx.cmd`}, // the .mcp.json from Linux
		{"node", `C:\Program Files\nodejs\node.exe`},
		{"node.exe", `C:\Program Files\nodejs\node.exe`},
		{"python", `C:\Python\python.exe`}, // PATHEXT order: .exe before .bat
		{`C:\proj\run`, `C:\proj\run.cmd`},
		{`C:\proj\run.cmd`, `C:\proj\run.cmd`},
		{`C:\tools\server.py`, `C:\tools\server.py`},
	} {
		got, err := lookWindowsCommand(tc.command, env, isFile)
		require.NoError(t, err, tc.command)
		assert.Equal(t, tc.want, got, tc.command)
	}

	// PATH and PATHEXT are the server's: names without case, the last
	// entry winning, and PATHEXT's order deciding.
	got, err := lookWindowsCommand("python", append(env, "PATHEXT=.BAT;.EXE", `PATH=C:\Python`), isFile)
	require.NoError(t, err)
	assert.Equal(t, `C:\Python\python.bat`, got)
	got, err = lookWindowsCommand("npx", []string{`PATH=D:\shadow;C:\Program Files\nodejs`}, isFile)
	require.NoError(t, err)
	assert.Equal(t, `D:\shadow\npx.exe`, got, "the first PATH directory with a match wins")

	// Never the current directory or a relative PATH entry; a miss is an
	// *exec.Error wrapping exec.ErrNotFound, as the actors classify it.
	files[`relative\bin\evil.exe`], files[`evil.exe`] = true, true
	for _, command := range []string{"evil", "missing", ""} {
		_, err := lookWindowsCommand(command, env, isFile)
		var ee *exec.Error
		require.ErrorAs(t, err, &ee, command)
		assert.ErrorIs(t, err, exec.ErrNotFound, command)
	}
	_, err = lookWindowsCommand("npx", []string{"PATH="}, isFile)
	assert.ErrorIs(t, err, exec.ErrNotFound)
}

func TestIsBatchFile(t *testing.T) {
	for _, p := range []string{`C:\x\npx.cmd`, `C:\x\RUN.BAT`, `C:\R&D (x86)\run it.Cmd`, `C:\x\run.cmd. .`, `C:\x\run.cmd::$DATA`, "run.bat"} {
		assert.True(t, isBatchFile(p), p)
	}
	for _, p := range []string{`C:\x\node.exe`, `C:\x.cmd\node.exe`, `C:\x\run.cmdx`, `C:\x\cmd`, `C:\x\run.batch`} {
		assert.False(t, isBatchFile(p), p)
	}
}

// batchArgs reads back what a batch file's %1 %2 ... are given, by
// cmd.exe's rules for the part after /s /c: quotes toggle quoting and are
// kept, and %%cd:~,% is an empty expansion after a literal %.
func batchArgs(t *testing.T, line string) []string {
	t.Helper()
	const prefix = `"C:\Windows\System32\cmd.exe" /d /e:ON /v:OFF /s /c "`
	require.True(t, strings.HasPrefix(line, prefix), line)
	require.True(t, strings.HasSuffix(line, `"`), line)
	inner := strings.ReplaceAll(line[len(prefix):len(line)-1], `%%cd:~,%`, "%")
	var out []string
	var cur strings.Builder
	quoted, started := false, false
	for _, c := range inner {
		switch {
		case c == '"':
			quoted, started = !quoted, true
			cur.WriteRune(c)
		case c == ' ' && !quoted:
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			// Outside quotes nothing may be a cmd.exe operator.
			if !quoted {
				require.False(t, strings.ContainsRune("&|<>^()%!,;=", c), "unquoted %q in %s", c, line)
			}
			cur.WriteRune(c)
			started = true
		}
	}
	require.False(t, quoted, "unbalanced quotes in %s", line)
	if started {
		out = append(out, cur.String())
	}
	return out
}

// msvcrtArg undoes the quoting a program's C runtime applies to one
// argument it receives from a batch file's %*.
func msvcrtArg(s string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			n := 0
			for i < len(s) && s[i] == '\\' {
				n++
				i++
			}
			if i < len(s) && s[i] == '"' {
				b.WriteString(strings.Repeat(`\`, n/2))
				if n%2 == 1 {
					b.WriteByte('"')
					continue
				}
				i-- // the quote is handled next round
				continue
			}
			b.WriteString(strings.Repeat(`\`, n))
			i--
		case c == '"':
			if quoted && i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			quoted = !quoted
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func TestBatchCommandLine(t *testing.T) {
	const cmdExe = `C:\Windows\System32\cmd.exe`
	args := []string{"-y", "@modelcontextprotocol/server-filesystem", `C:\My Files\`, "a&b", "calc|x", `say "hi"`,
		"50%", "%PATH%", "", "a!b", `x\"&calc`, "(paren)", "k=v,w;z", `C:\dir\`, "^caret", "plain"}
	line, err := batchCommandLine(cmdExe, `C:\Program Files\nodejs\npx.cmd`, args)
	require.NoError(t, err)
	got := batchArgs(t, line)
	require.Len(t, got, len(args)+1, line)
	assert.Equal(t, `"C:\Program Files\nodejs\npx.cmd"`, got[0])
	for i, a := range args {
		assert.Equal(t, a, msvcrtArg(got[i+1]), "argument %d %q in %s", i, a, line)
	}
	assert.Contains(t, line, `"50%%cd:~,%"`, "a %% cannot form a variable reference")
	assert.Contains(t, line, ` plain`, "plain words stay unquoted")

	// A % in the script's own path is escaped the same way.
	line, err = batchCommandLine(cmdExe, `C:\Users\100%dev\run.cmd`, nil)
	require.NoError(t, err)
	assert.Equal(t, `"C:\Windows\System32\cmd.exe" /d /e:ON /v:OFF /s /c ""C:\Users\100%%cd:~,%dev\run.cmd""`, line)

	// What cmd.exe cannot carry is refused, not mangled.
	for _, bad := range []string{"first\nsecond", "cr\r", "nul\x00"} {
		_, err := batchCommandLine(cmdExe, `C:\x\run.cmd`, []string{"ok", bad})
		assert.True(t, errors.Is(err, ErrBatchArgument), "%q: %v", bad, err)
	}
}
