package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/mcpvisor/mcpvisor"
)

// VS Code's "envFile": a stdio server entry may name a file of
// environment variables, which Load reads when it loads the entry.

// maxEnvFile bounds an envFile's size.
const maxEnvFile = 1 << 20

// ErrEnvFile is wrapped (inside a *Error) when a server's envFile
// cannot be read or parsed. Messages name lines and variables, never
// values.
var ErrEnvFile = errors.New("envFile")

// ErrEnvFileNotRegular is wrapped with ErrEnvFile when an envFile is not
// a regular file (a FIFO, a device, a directory, a socket).
var ErrEnvFileNotRegular = errors.New("not a regular file")

// envFilePath resolves a server's envFile (already expanded) against the
// directory of the config file that names it.
func envFilePath(envFile, dir string) string {
	if envFile == "" || filepath.IsAbs(envFile) {
		return envFile
	}
	return filepath.Join(dir, envFile)
}

// readEnvFile reads and parses an env file; it returns the file's bytes
// too.
func readEnvFile(path string) (map[string]string, []byte, error) {
	data, err := readEnvFileBytes(path)
	if err != nil {
		return nil, nil, err
	}
	vars, err := parseEnvFile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w %s: %w", ErrEnvFile, path, err)
	}
	return vars, data, nil
}

// readEnvFileBytes reads an env file, at most maxEnvFile bytes. It must
// be a regular file (a symbolic link to one is followed): a FIFO, a
// device or /dev/stdin would block the loader or read what is not a
// file, so it is opened without blocking (openNonBlocking) and refused
// unless what was opened is a regular file.
func readEnvFileBytes(path string) ([]byte, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrEnvFile, path, fileError(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrEnvFile, path, fileError(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w %s: %w", ErrEnvFile, path, ErrEnvFileNotRegular)
	}
	if fi.Size() > maxEnvFile {
		return nil, fmt.Errorf("%w %s: larger than %d bytes", ErrEnvFile, path, maxEnvFile)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxEnvFile+1)); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrEnvFile, path, fileError(err))
	}
	if buf.Len() > maxEnvFile {
		return nil, fmt.Errorf("%w %s: larger than %d bytes", ErrEnvFile, path, maxEnvFile)
	}
	return buf.Bytes(), nil
}

// parseEnvFile reads the .env format: one KEY=VALUE per line; blank lines
// and lines starting with # are skipped; an optional "export " prefix; a
// value in double quotes may span lines and knows the escapes \n, \r,
// \t, \" and \\; one in single quotes is taken as written; an unquoted one
// is trimmed and ends at " #" (a comment). Values are not expanded. A key
// given twice takes its last value.
func parseEnvFile(data []byte) (map[string]string, error) {
	vars := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(string(bytes.TrimPrefix(data, []byte("\ufeff"))), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !isEnvKey(key) {
			return nil, fmt.Errorf("line %d: want KEY=VALUE with KEY made of letters, digits, '_', '.' and '-'", lineNo)
		}
		value = strings.TrimLeft(value, " \t")
		switch {
		case strings.HasPrefix(value, `"`):
			var b strings.Builder
			rest := value[1:]
			for {
				end, closed := unescapeDouble(&b, rest)
				if closed {
					if tail := strings.TrimSpace(rest[end+1:]); tail != "" && !strings.HasPrefix(tail, "#") {
						return nil, fmt.Errorf("line %d: %s: text after the closing quote", lineNo, key)
					}
					break
				}
				if i+1 >= len(lines) {
					return nil, fmt.Errorf("line %d: %s: no closing double quote", lineNo, key)
				}
				b.WriteByte('\n')
				i++
				rest = lines[i]
			}
			value = b.String()
		case strings.HasPrefix(value, "'"):
			end := strings.IndexByte(value[1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("line %d: %s: no closing single quote", lineNo, key)
			}
			if tail := strings.TrimSpace(value[end+2:]); tail != "" && !strings.HasPrefix(tail, "#") {
				return nil, fmt.Errorf("line %d: %s: text after the closing quote", lineNo, key)
			}
			value = value[1 : end+1]
		default:
			if j := strings.Index(value, " #"); j >= 0 {
				value = value[:j]
			}
			value = strings.TrimSpace(value)
		}
		vars[key] = value
	}
	return vars, nil
}

// unescapeDouble writes the double-quoted text of s to b up to its
// closing quote, and returns that quote's index; closed is false when s
// ends first.
func unescapeDouble(b *strings.Builder, s string) (end int, closed bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return i, true
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			default: // \" \\ and anything else: the character itself
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return len(s), false
}

func isEnvKey(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '.' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// mergeEnvFile reads sc's envFile (resolved against dir) into sc.Env,
// under the entry's own env (which wins), and sets sc.EnvFile to the
// file's path.
func mergeEnvFile(sc *mcpvisor.ServerConfig, dir string) error {
	if sc.EnvFile == "" {
		return nil
	}
	sc.EnvFile = envFilePath(sc.EnvFile, dir)
	vars, _, err := readEnvFile(sc.EnvFile)
	if err != nil {
		return err
	}
	if len(vars) == 0 {
		return nil
	}
	env := make(map[string]string, len(vars)+len(sc.Env))
	for k, v := range vars {
		env[k] = v
	}
	for k, v := range sc.Env {
		env[k] = v
	}
	sc.Env = env
	return nil
}
