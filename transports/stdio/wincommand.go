package stdio

// How a command names a program on Windows. These rules are plain string
// work, kept free of Windows calls so that they are tested on every
// platform; proc_windows.go applies them.

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrBatchArgument is wrapped (inside an *exec.Error) when a server whose
// command is a batch file (.cmd, .bat: npx, npm and every npm-installed
// command on Windows) is given an argument that cmd.exe cannot be made
// to pass on unchanged: one with a line break or a NUL in it.
var ErrBatchArgument = errors.New("a batch file cannot be given this argument")

// defaultPathExt is what Windows uses when PATHEXT is unset.
var defaultPathExt = []string{".com", ".exe", ".bat", ".cmd"}

// envValue returns the value of name in env (KEY=value entries, the last
// one winning), comparing names without case as Windows does.
func envValue(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		k, v, ok := strings.Cut(env[i], "=")
		if ok && strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// pathExts returns the executable extensions of env's PATHEXT, lower
// case with their dot.
func pathExts(env []string) []string {
	v, ok := envValue(env, "PATHEXT")
	if !ok || v == "" {
		return defaultPathExt
	}
	var exts []string
	for _, e := range strings.Split(strings.ToLower(v), ";") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if e[0] != '.' {
			e = "." + e
		}
		exts = append(exts, e)
	}
	if len(exts) == 0 {
		return defaultPathExt
	}
	return exts
}

// winHasDir reports whether a Windows command names a directory (a
// separator or a drive) rather than a bare program name.
func winHasDir(name string) bool { return strings.ContainsAny(name, `\/:`) }

// winJoin joins a directory and a name with a backslash.
func winJoin(dir, name string) string {
	if strings.HasSuffix(dir, `\`) || strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + `\` + name
}

// winIsAbs reports whether a Windows path is absolute: a drive and a
// separator, or a UNC path.
func winIsAbs(p string) bool {
	if strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//") {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// winExt returns the extension of a path's last element, lower case,
// with its dot ("" when none).
func winExt(p string) string {
	base := p[strings.LastIndexAny(p, `\/:`)+1:]
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		return strings.ToLower(base[i:])
	}
	return ""
}

// lookWindowsCommand finds the program that command names the way a
// Windows user expects, with the PATH and PATHEXT of env (the server's
// environment): "npx" is found as npx.cmd, "python" as python.exe. A
// name with a directory is tried as it is and with each extension; a
// bare name in every absolute PATH directory, in order. The current
// directory and relative PATH entries are never searched (a project
// folder must not be able to plant a program). isFile reports whether a
// path is an existing file. The error is an *exec.Error wrapping
// exec.ErrNotFound.
func lookWindowsCommand(command string, env []string, isFile func(string) bool) (string, error) {
	exts := pathExts(env)
	try := func(p string) (string, bool) {
		if winExt(p) != "" && isFile(p) {
			return p, true
		}
		for _, e := range exts {
			if isFile(p + e) {
				return p + e, true
			}
		}
		return "", false
	}
	if command == "" {
		return "", &exec.Error{Name: command, Err: exec.ErrNotFound}
	}
	if winHasDir(command) {
		if p, ok := try(command); ok {
			return p, nil
		}
		return "", &exec.Error{Name: command, Err: exec.ErrNotFound}
	}
	path, _ := envValue(env, "PATH")
	for _, dir := range strings.Split(path, ";") {
		dir = strings.Trim(strings.TrimSpace(dir), `"`)
		if dir == "" || !winIsAbs(dir) {
			continue
		}
		if p, ok := try(winJoin(dir, command)); ok {
			return p, nil
		}
	}
	return "", &exec.Error{Name: command, Err: exec.ErrNotFound}
}

// isBatchFile reports whether Windows runs path through cmd.exe: its
// extension is .bat or .cmd once the trailing dots and spaces that
// Windows ignores are gone (CVE-2024-43402 came from missing those).
func isBatchFile(path string) bool {
	base := path[strings.LastIndexAny(path, `\/`)+1:]
	if i := strings.IndexByte(base, ':'); i >= 0 {
		base = base[:i] // a stream suffix: run.cmd::$DATA
	}
	switch winExt(strings.TrimRight(base, ". ")) {
	case ".bat", ".cmd":
		return true
	}
	return false
}

// batchCommandLine is the command line that runs the batch file script
// with args through the interpreter cmdExe (cmd.exe from the system
// folder) so that the script sees each argument as it was given: the
// interpreter's AutoRun is skipped (/d), command extensions are on
// (/e:ON, which the %-escape below needs), delayed expansion is off
// (/v:OFF, so '!' is plain text), and /s /c strip exactly the outer pair
// of quotes around the script and its arguments.
//
// A quoted argument keeps & | < > ^ ( ) as text; a quote inside is
// doubled (cmd.exe ends and restarts its quoting, and the program the
// script passes the argument to reads one quote); a % is written as
// %%cd:~,% (an empty slice of a variable that always exists follows the
// sign, so no %NAME% can form around it); backslashes before a quote or
// at the end are doubled for the program's own unquoting. Line breaks
// and NULs cannot be passed at all: ErrBatchArgument.
func batchCommandLine(cmdExe, script string, args []string) (string, error) {
	if strings.ContainsAny(script, "\"\r\n\x00") {
		return "", fmt.Errorf("%w: the batch file's path %q has a quote or a line break", ErrBatchArgument, script)
	}
	var b strings.Builder
	b.WriteString(`"` + cmdExe + `" /d /e:ON /v:OFF /s /c ""`)
	writeBatchText(&b, script)
	b.WriteByte('"')
	for i, a := range args {
		if strings.ContainsAny(a, "\r\n\x00") {
			return "", fmt.Errorf("%w: argument %d has a line break or a NUL", ErrBatchArgument, i+1)
		}
		b.WriteByte(' ')
		writeBatchArg(&b, a)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// batchPlain reports whether c can stand unquoted in a batch file's
// arguments.
func batchPlain(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.ContainsRune(`-_.:/\+@~#`, c)
}

// writeBatchArg writes one argument for batchCommandLine.
func writeBatchArg(b *strings.Builder, a string) {
	quote := a == "" || strings.HasSuffix(a, `\`) || strings.IndexFunc(a, func(c rune) bool { return !batchPlain(c) }) >= 0
	if !quote {
		b.WriteString(a)
		return
	}
	b.WriteByte('"')
	slashes := 0
	for _, c := range a {
		switch c {
		case '\\':
			slashes++
			b.WriteRune(c)
			continue
		case '"':
			b.WriteString(strings.Repeat(`\`, slashes)) // doubles the run before the quote
			b.WriteString(`""`)
		case '%':
			b.WriteString(`%%cd:~,%`)
		default:
			b.WriteRune(c)
		}
		slashes = 0
	}
	b.WriteString(strings.Repeat(`\`, slashes)) // the closing quote must stay a quote
	b.WriteByte('"')
}

// writeBatchText writes the script's path (inside quotes already) with
// its % signs escaped.
func writeBatchText(b *strings.Builder, s string) {
	b.WriteString(strings.ReplaceAll(s, "%", `%%cd:~,%`))
}
