package stdiotest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Proc identifies a process: its pid and start time (clock ticks after
// boot), so that a reused pid is not mistaken for it.
type Proc struct {
	Pid   int
	Start uint64
}

// stat is what a test needs of /proc/<pid>/stat.
type stat struct {
	ppid  int
	start uint64
	live  bool // not a zombie
}

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	start, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return stat{ppid: ppid, start: start, live: string(f[0]) != "Z" && string(f[0]) != "X"}, true
}

func pids() []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	out := make([]int, 0, len(dirs))
	for _, d := range dirs {
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Descendants returns the live processes below pid, found by following
// parent links in /proc.
func Descendants(pid int) []Proc {
	children := map[int][]int{}
	stats := map[int]stat{}
	for _, p := range pids() {
		if s, ok := readStat(p); ok {
			stats[p] = s
			children[s.ppid] = append(children[s.ppid], p)
		}
	}
	var out []Proc
	queue := append([]int(nil), children[pid]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if s := stats[p]; s.live {
			out = append(out, Proc{Pid: p, Start: s.start})
		}
		queue = append(queue, children[p]...)
	}
	return out
}

// Alive returns those of ps that still run (the same pid with the same
// start time, not a zombie).
func Alive(ps []Proc) []Proc {
	var out []Proc
	for _, p := range ps {
		if s, ok := readStat(p.Pid); ok && s.live && s.start == p.Start {
			out = append(out, p)
		}
	}
	return out
}

// WithEnv returns the live processes whose environment holds the entry
// (NAME=value). A process started with it passes it on to everything it
// starts, whatever session, group or parent they end up with.
func WithEnv(entry string) []int {
	want := append([]byte(entry), 0)
	var out []int
	for _, p := range pids() {
		if p == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		if s, ok := readStat(p); ok && s.live {
			out = append(out, p)
		}
	}
	return out
}

// Eventually polls f until it returns nothing or d passes, and returns
// its last result.
func Eventually[T any](d time.Duration, f func() []T) []T {
	deadline := time.Now().Add(d)
	for {
		left := f()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Parent returns pid's parent (0 when pid is gone).
func Parent(pid int) int {
	s, _ := readStat(pid)
	return s.ppid
}

// Self returns pid as a Proc (Start 0 when it is gone).
func Self(pid int) Proc {
	s, _ := readStat(pid)
	return Proc{Pid: pid, Start: s.start}
}
