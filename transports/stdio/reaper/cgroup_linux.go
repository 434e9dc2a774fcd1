package reaper

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups makes one cgroup v2 per server below the reaper's own cgroup,
// where that hierarchy is writable: <own cgroup>/mcpvisor-<reaper pid>/s<n>.
// A server is born into its cgroup (CLONE_INTO_CGROUP), so every process
// it ever starts is in it, whatever it does with sessions, groups or
// parents, and one write to cgroup.kill ends them all.
//
// No controller is enabled: the cgroups only group processes. (Enabling
// one, such as memory, would need the reaper's own cgroup to hold no
// process, that is moving the host out of the cgroup it was given.)
//
// Concurrency: the methods may be called from any goroutine; the
// counter is guarded by the reaper's lock.
type cgroups struct {
	dir  string // the reaper's directory of server cgroups
	next int    // guarded by the reaper's mutex
}

// openCgroups creates the reaper's cgroup directory, or returns nil when
// there is no writable cgroup v2 hierarchy.
func openCgroups() *cgroups {
	own, err := ownCgroupDir()
	if err != nil {
		return nil
	}
	sweepStale(own)
	dir := filepath.Join(own, cgroupPrefix+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil
	}
	return &cgroups{dir: dir}
}

// cgroupPrefix starts the name of a reaper's cgroup directory; the
// reaper's pid follows.
const cgroupPrefix = "mcpvisor-"

// sweepStale removes the cgroup directories of reapers that died without
// removing them (killed with SIGKILL), after ending what is left in them:
// their servers died with them, but a server's descendants did not, and
// their cgroups still hold them. A directory whose reaper runs (its pid's
// command line is a reaper's) is left alone; so is one this user may not
// change.
func sweepStale(own string) {
	entries, err := os.ReadDir(own)
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), cgroupPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), cgroupPrefix) || err != nil {
			continue
		}
		if pid != self && reaperRuns(pid) {
			continue
		}
		dir := filepath.Join(own, e.Name())
		subs, _ := os.ReadDir(dir)
		for _, sub := range subs {
			if sub.IsDir() {
				path := filepath.Join(dir, sub.Name())
				if cgroupPopulated(path) {
					signalCgroup(path, syscall.SIGKILL)
				}
				_ = removeCgroup(path, killWait)
			}
		}
		_ = removeCgroup(dir, 0)
	}
}

// reaperRuns reports whether pid is a running reaper.
func reaperRuns(pid int) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(cmdline, []byte(helperArg0+"\x00"+modeReaper+"\x00"))
}

// ownCgroupDir finds the directory of this process's cgroup in the
// cgroup v2 hierarchy.
func ownCgroupDir() (string, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			dir := filepath.Join(mount, rest)
			if fi, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil || fi.IsDir() {
				return "", fmt.Errorf("no cgroup.procs in %s", dir)
			}
			return dir, nil
		}
	}
	return "", errors.New("not in a cgroup v2 hierarchy")
}

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional…] - fstype source superoptions
		line := sc.Text()
		before, after, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(after, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(before)
		if len(fields) >= 5 && fields[3] == "/" {
			return unescapeMountPath(fields[4]), nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// create makes the cgroup of a new server and opens it for
// CLONE_INTO_CGROUP. The caller holds the reaper's lock.
func (g *cgroups) create() (path string, fd int, err error) {
	g.next++
	path = filepath.Join(g.dir, "s"+strconv.Itoa(g.next))
	if err := os.Mkdir(path, 0o755); err != nil {
		return "", -1, err
	}
	fd, err = unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return "", -1, err
	}
	return path, fd, nil
}

// members returns the processes in the cgroup at path.
func cgroupMembers(path string) []int {
	data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for f := range bytes.FieldsSeq(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalCgroup sends sig to every process in the cgroup at path; SIGKILL
// goes through cgroup.kill where the kernel has it (5.14), which also
// catches processes being forked meanwhile. It returns how many
// processes it signalled (-1: all of them, through cgroup.kill).
func signalCgroup(path string, sig syscall.Signal) int {
	if sig == syscall.SIGKILL {
		if err := os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0); err == nil {
			return -1
		}
	}
	n := 0
	for _, pid := range cgroupMembers(path) {
		if syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// cgroupPopulated reports whether any process is left in the cgroup at
// path (or its descendants).
func cgroupPopulated(path string) bool {
	data, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	if err != nil {
		return len(cgroupMembers(path)) > 0
	}
	return bytes.Contains(data, []byte("populated 1"))
}

// removeCgroup removes the cgroup at path once it is empty, waiting up
// to d for the kernel to finish the killed processes' exit.
func removeCgroup(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := unix.Rmdir(path)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s: %w", path, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
