package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// link is a symbolic link: its path and its target as written.
type link struct {
	path, target string
}

// maxLinks bounds the symbolic links followed for one path (the
// kernel's own limit is 40).
const maxLinks = 40

// resolve returns the absolute, clean path p with every symbolic link
// resolved (as far as the path exists: a missing remainder is kept as
// written) and the links met on the way, outermost first. A loop, or more
// than maxLinks links, leaves the rest unresolved.
func resolve(p string) (real string, links []link) {
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	real = "/"
	for n := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			real = filepath.Dir(real)
			continue
		}
		next := filepath.Join(real, name)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 || n >= maxLinks {
			real = next
			if err != nil { // nothing below a missing path can be a link
				return filepath.Join(append([]string{real}, rest...)...), links
			}
			continue
		}
		target, err := os.Readlink(next)
		if err != nil {
			real = next
			continue
		}
		n++
		links = append(links, link{path: next, target: target})
		if filepath.IsAbs(target) {
			real = "/"
		}
		rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), rest...)
	}
	return real, links
}
