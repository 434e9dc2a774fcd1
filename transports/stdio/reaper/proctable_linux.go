package reaper

import (
	"bytes"
	"os"
	"strconv"
	"sync"
)

// procEntry is one process as /proc/<pid>/stat shows it.
type procEntry struct {
	ppid  int
	start uint64 // start time in clock ticks after boot: with the pid, identifies the process
	dead  bool   // zombie or dead: it runs nothing
}

// procTable is a snapshot of every process in /proc. It is not modified
// after readProcTable returns, so several goroutines may read it.
type procTable struct {
	procs    map[int]procEntry
	children map[int][]int // by parent
}

// readProcTable reads /proc/*/stat. Processes that end while it reads are
// simply missing.
func readProcTable() *procTable {
	t := &procTable{procs: make(map[int]procEntry, 512)}
	d, err := os.Open("/proc")
	if err != nil {
		return t
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	buf := make([]byte, 0, 512)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if e, ok := readStat(pid, buf); ok {
			t.procs[pid] = e
		}
	}
	t.children = make(map[int][]int, len(t.procs))
	for p, e := range t.procs {
		t.children[e.ppid] = append(t.children[e.ppid], p)
	}
	return t
}

// readStat reads and parses /proc/<pid>/stat into buf's storage.
func readStat(pid int, buf []byte) (procEntry, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	n, err := f.Read(buf[:cap(buf)])
	f.Close()
	if err != nil || n == 0 {
		return procEntry{}, false
	}
	return parseStat(buf[:n])
}

// parseStat parses a /proc/<pid>/stat line: pid (comm) state ppid pgrp
// session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
// cutime cstime priority nice num_threads itrealvalue starttime … The
// command name may hold spaces and parentheses: fields start after the
// last ')'.
func parseStat(b []byte) (procEntry, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procEntry{}, false
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is the state, so field k of the line (1-based, pid = 1)
	// is fields[k-3].
	if len(fields) < 20 {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	start, err2 := strconv.ParseUint(string(fields[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procEntry{}, false
	}
	state := fields[0]
	return procEntry{ppid: ppid, start: start, dead: len(state) == 1 && (state[0] == 'Z' || state[0] == 'X')}, true
}

// descendants returns the live processes below pid (pid excluded), found
// by following parent links.
func (t *procTable) descendants(pid int) []int {
	var out []int
	queue := append([]int(nil), t.children[pid]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if !t.procs[p].dead {
			out = append(out, p)
		}
		queue = append(queue, t.children[p]...)
	}
	return out
}

// sameProcess reports whether pid still names the process that started
// at start (and has not ended).
func sameProcess(pid int, start uint64) bool {
	var buf [512]byte
	e, ok := readStat(pid, buf[:0])
	return ok && !e.dead && e.start == start
}

// scanner reads the process table for many callers at once: a caller
// gets a table whose reading began after it asked, and callers that ask
// while a reading is under way share the next one. Stopping a thousand
// servers at once costs a few readings of /proc, not a thousand.
//
// Concurrency: fresh may be called from any goroutine.
type scanner struct {
	mu      sync.Mutex
	cond    *sync.Cond
	started uint64 // readings begun
	done    uint64 // readings finished
	running bool
	latest  *procTable
}

func newScanner() *scanner {
	s := &scanner{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// fresh returns a table read after the call began.
func (s *scanner) fresh() *procTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.started + 1 // the next reading to begin
	for s.done < want {
		if !s.running {
			s.running = true
			s.started++
			s.mu.Unlock()
			t := readProcTable()
			s.mu.Lock()
			s.latest, s.done, s.running = t, s.started, false
			s.cond.Broadcast()
			continue
		}
		s.cond.Wait()
	}
	return s.latest
}
