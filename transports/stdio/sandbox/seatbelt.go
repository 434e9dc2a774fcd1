package sandbox

import (
	"path/filepath"
	"strings"
)

// SeatbeltProfile builds the macOS sandbox-exec profile (SBPL) of a
// server. SBPL takes the last matching rule, so the profile allows
// everything, then takes away reads of the home directory, every write
// and (without network) the network, then gives back, last, what the
// server may see and write. Paths are resolved through symbolic links
// (Seatbelt matches real paths: /tmp is /private/tmp).
//
// It is built and checked here but untested on macOS (docs/sandbox.md).
func SeatbeltProfile(home string, read, write []string, tempDir string, network bool) string {
	var b strings.Builder
	b.WriteString("(version 1)\n(allow default)\n")
	if home != "" && home != "/" {
		b.WriteString("(deny file-read* (subpath " + sbplString(realPath(home)) + "))\n")
	}
	// Writes: nowhere, but the devices a program needs.
	b.WriteString("(deny file-write*)\n")
	b.WriteString(`(allow file-write* (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/dtracehelper") (regex #"^/dev/fd/") (regex #"^/dev/ttys[0-9]+$"))` + "\n")
	if !network {
		b.WriteString("(deny network*)\n(allow network* (remote unix-socket))\n")
	}
	if len(read) > 0 {
		b.WriteString("(allow file-read*")
		for _, p := range read {
			b.WriteString(" (subpath " + sbplString(realPath(p)) + ")")
		}
		b.WriteString(")\n")
	}
	w := append([]string(nil), write...)
	if tempDir != "" {
		w = append(w, tempDir)
	}
	if len(w) > 0 {
		b.WriteString("(allow file-read* file-write*")
		for _, p := range w {
			b.WriteString(" (subpath " + sbplString(realPath(p)) + ")")
		}
		b.WriteString(")\n")
	}
	return b.String()
}

// sbplString quotes s as an SBPL string literal.
func sbplString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// realPath resolves symbolic links where the path exists.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
