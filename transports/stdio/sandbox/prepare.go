package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/transports"
)

// launcherCaches are the directories, relative to the home directory, that
// the common launchers (npm and npx, uv and uvx, pip) need to read so that
// a server they start works confined with no extra configuration.
var launcherCaches = []string{".npm", ".cache/uv", ".local/share/uv", ".cache/pip"}

// toolchainRoots are the directories, relative to the home directory,
// of the version managers and installers that put interpreters and
// package runners under the home: a shim or launcher there runs code
// from elsewhere in the same tree (pyenv's shims run libexec/pyenv, which
// picks versions/<v>/bin/python3; asdf's and rbenv's likewise; nvm, fnm
// and volta keep whole Node installations; cargo and rustup binaries).
// When a server's command lives in one, the whole tree is made readable;
// the rest of the home stays hidden.
var toolchainRoots = []string{
	".pyenv", ".asdf", ".rbenv", ".nodenv", ".goenv", ".jenv", ".plenv", ".sdkman",
	".nvm", ".fnm", ".local/share/fnm", ".volta", ".bun", ".deno",
	".local/share/mise", ".local/share/rtx", ".local/share/pnpm",
	".local/share/uv", ".local/pipx", ".cargo", ".rustup",
}

// toolchainFiles are the files in the home directory where version
// managers keep the global choice of version (asdf and mise:
// .tool-versions; pyenv, nodenv, rbenv, goenv: .<lang>-version; nvm:
// .nvmrc). A shim reads them to pick what to run; they are made readable
// (and nothing else of the home) when the command is in a toolchain.
var toolchainFiles = []string{
	".tool-versions", ".python-version", ".node-version", ".nvmrc", ".ruby-version", ".go-version", ".java-version",
	".config/mise/config.toml",
}

// privateCaches are the launcher caches that the launchers also write to
// (npx installs a package into its cache, uvx builds an environment in
// its cache, npm writes its cache even when a package is there already),
// with the variable that moves each. A confined server that may not
// write the user's cache gets a private one in its TMPDIR instead: it
// downloads what it runs (network needed), and cannot change what the
// user's own npx or uvx runs later.
var privateCaches = []struct{ dir, env string }{
	{".npm", "npm_config_cache"},
	{".cache/uv", "UV_CACHE_DIR"},
	{".cache/pip", "PIP_CACHE_DIR"},
}

// cacheEnv points the launchers at private caches below tmp (the TMPDIR
// as the server sees it), for the caches the server may not write and
// whose variable its config does not set.
func cacheEnv(v view, cmd Command, tmp string) []string {
	var env []string
	for _, c := range privateCaches {
		if _, set := cmd.Env[c.env]; set {
			continue
		}
		real := filepath.Join(v.home, c.dir)
		writable := false
		for _, w := range v.write {
			if inside(real, w) {
				writable = true
				break
			}
		}
		if !writable {
			env = append(env, c.env+"="+filepath.Join(tmp, "cache", filepath.Base(c.dir)))
		}
	}
	return env
}

// Prepare decides how to confine one start of the server cmd under cfg
// (which must be enabled) and returns the plan the exec stage applies.
// It picks the mechanism (auto: the strongest that works here), creates
// the write paths that are missing and a private temporary directory,
// and lists what the server may read and write. An error matching
// ErrUnavailable means no requested mechanism can be had; the caller
// must not start the server. Call Plan.Cleanup once the server and its
// descendants are gone.
func Prepare(cfg *transports.Sandbox, cmd Command, opts Options) (*Plan, error) {
	if cfg == nil || !cfg.Enabled {
		return nil, errors.New("sandbox: Prepare needs an enabled sandbox")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	requested := cfg.Mechanism
	if requested == "" {
		requested = transports.SandboxAuto
	}
	var candidates []transports.SandboxMechanism
	if requested == transports.SandboxAuto {
		candidates = platformMechanisms()
	} else {
		candidates = []transports.SandboxMechanism{requested}
	}
	unavailable := &UnavailableError{Requested: requested}
	var chosen transports.SandboxMechanism
	for _, m := range candidates {
		if opts.disabled(m) {
			unavailable.Reasons = append(unavailable.Reasons, string(m)+": disabled by the host")
			continue
		}
		if err := check(m, cfg, &opts); err != nil {
			unavailable.Reasons = append(unavailable.Reasons, string(m)+": "+err.Error())
			continue
		}
		chosen = m
		break
	}
	if chosen == "" {
		if len(unavailable.Reasons) == 0 {
			unavailable.Reasons = []string{"no mechanism on " + platformName()}
		}
		return nil, unavailable
	}

	home, err := homeDir(opts.Home)
	if err != nil {
		return nil, &UnavailableError{Requested: requested, Reasons: []string{"finding the home directory to hide: " + err.Error()}}
	}
	for _, w := range cfg.Write {
		if err := os.MkdirAll(w, 0o755); err != nil && !isExisting(w) {
			return nil, fmt.Errorf("sandbox: creating the write path %s: %w", w, err)
		}
	}
	mem, procs, files := cfg.Limits()
	plan := &Plan{
		Mechanism: chosen,
		Limits:    Limits{DataBytes: mem, OpenFiles: uint64(files), Processes: uint64(procs)},
	}
	v := visibility(cfg, cmd, home)
	if err := build(plan, v, cfg, cmd, &opts); err != nil {
		plan.Cleanup()
		return nil, err
	}
	return plan, nil
}

// isExisting reports whether path exists (a write path may be a file).
func isExisting(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// homeDir returns the home directory to hide: given, or the current
// user's in the password database.
func homeDir(given string) (string, error) {
	if given != "" {
		abs, err := filepath.Abs(given)
		if err != nil {
			return "", err
		}
		real, _ := resolve(abs)
		return real, nil
	}
	u, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		return "", err
	}
	if u.HomeDir == "" {
		return "", errors.New("the password database gives no home directory")
	}
	real, _ := resolve(filepath.Clean(u.HomeDir))
	return real, nil
}

// view is what a confined server may see inside the hidden places.
type view struct {
	home  string
	read  []string // readable (and executable) paths, absolute, clean, symbolic links resolved
	write []string // writable paths, the same
	links []link   // the symbolic links met on the way to them, outermost first
	notes []string // what was left out, and why
}

// visibility lists what the server may read and write: the listed paths,
// its working directory, its command's directory (and, for a "bin"
// directory, the installation it belongs to), and the launcher caches
// that exist. Each path is resolved through its symbolic links, so that
// a rule covers the directory a link leads to (the links themselves are
// kept in links, for a mechanism that must recreate them). A path that
// resolves to the home directory itself, or to one that holds it, is
// left out: it would expose everything.
func visibility(cfg *transports.Sandbox, cmd Command, home string) view {
	v := view{home: home}
	add := func(list *[]string, p, why string) {
		p = filepath.Clean(p)
		real, links := resolve(p)
		if real == "/" || real == home || within(home, real) {
			v.notes = append(v.notes, fmt.Sprintf("%s %s not made visible: it holds the home directory", why, p))
			return
		}
		v.addLinks(links)
		for _, q := range *list {
			if q == real {
				return
			}
		}
		*list = append(*list, real)
	}
	for _, p := range cfg.Read {
		add(&v.read, p, "read path")
	}
	if cmd.Dir != "" {
		add(&v.read, cmd.Dir, "working directory")
	}
	toolchain := false
	for _, dir := range commandDirs(cmd) {
		add(&v.read, dir, "command directory")
		if filepath.Base(dir) == "bin" {
			add(&v.read, filepath.Dir(dir), "command installation")
		}
		if root := toolchainRoot(home, dir); root != "" {
			add(&v.read, root, "command toolchain")
			toolchain = true
		}
	}
	if toolchain {
		for _, f := range toolchainFiles {
			if p := filepath.Join(home, f); isExisting(p) {
				add(&v.read, p, "toolchain version file")
			}
		}
	}
	for _, c := range launcherCaches {
		if p := filepath.Join(home, c); isExisting(p) {
			add(&v.read, p, "launcher cache")
		}
	}
	for _, p := range cfg.Write {
		add(&v.write, p, "write path")
	}
	return v
}

func (v *view) addLinks(links []link) {
next:
	for _, l := range links {
		for _, k := range v.links {
			if k.path == l.path {
				continue next
			}
		}
		v.links = append(v.links, l)
	}
}

// toolchainRoot returns the toolchain tree of home (toolchainRoots)
// that holds dir, or "". dir is as named or resolved; home is resolved,
// so dir is resolved for the comparison too.
func toolchainRoot(home, dir string) string {
	if home == "" || home == "/" {
		return ""
	}
	real, _ := resolve(dir)
	for _, r := range toolchainRoots {
		if root := filepath.Join(home, r); inside(real, root) || inside(filepath.Clean(dir), root) {
			return root
		}
	}
	return ""
}

// commandDirs are the directories of the server's executable, absolute:
// where it is named, and where it is when that is a symbolic link (a
// launcher in ~/.local/bin linked into a tool's installation).
func commandDirs(cmd Command) []string {
	p := cmd.Path
	if p == "" {
		return nil
	}
	if !filepath.IsAbs(p) {
		if cmd.Dir == "" {
			return nil
		}
		p = filepath.Join(cmd.Dir, p)
	}
	dirs := []string{filepath.Dir(p)}
	if r, err := filepath.EvalSymlinks(p); err == nil && filepath.Dir(r) != dirs[0] {
		dirs = append(dirs, filepath.Dir(r))
	}
	return dirs
}

// within reports whether path is strictly below dir.
func within(path, dir string) bool {
	if dir == "/" {
		return path != "/"
	}
	return strings.HasPrefix(path, dir+"/")
}

// inside reports whether path is dir or below it.
func inside(path, dir string) bool { return path == dir || within(path, dir) }
