package harness

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTime is the CPU (user+system) this process has used so far. The
// servers are other processes, so it is the client's.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ChildrenCPUTime is the CPU (user+system) of this process's children
// that have ended and been waited for, and of their own waited-for
// descendants: for a Supervisor's stdio servers, the process helper's
// once it has ended (it waits for the servers and whatever they start).
func ChildrenCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HelperCPUTime is the CPU (user+system) used so far by this process's
// children that are mcpvisor's process helper (argv[0]
// "mcpvisor-helper": the reaper that starts a Supervisor's stdio servers
// on its behalf). A connect's fork and exec happen there, so a fair
// comparison with clients that start their servers themselves adds it to
// the client's own CPU. A helper that ended in between is not counted.
func HelperCPUTime() time.Duration {
	var total time.Duration
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", f, "cmdline"))
			if err != nil {
				continue
			}
			if arg0, _, _ := bytes.Cut(cmdline, []byte{0}); string(arg0) != "mcpvisor-helper" {
				continue
			}
			if c := ProcessCPUTime(pid); c > 0 {
				total += c
			}
		}
	}
	return total
}

// ProcessCPUTime is the CPU (user+system) process pid has used so far,
// from /proc/<pid>/stat (in clock ticks of 10 ms), or -1 when pid is 0 or
// cannot be read.
func ProcessCPUTime(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return -1
	}
	// After the comm: state(0) ppid(1) … utime(11) stime(12).
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	const tick = 10 * time.Millisecond // USER_HZ: 100 on Linux
	return time.Duration(utime+stime) * tick
}

// statusKB returns a field of /proc/self/status in KiB (VmRSS, VmHWM), or
// -1 when it cannot be read.
func statusKB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// RSS is this process's resident memory in bytes (VmRSS), or -1.
func RSS() int64 { return kb(statusKB("VmRSS")) }

// PeakRSS is this process's peak resident memory in bytes since it started
// or since the last ResetPeakRSS (VmHWM); without /proc, getrusage's
// maxrss (since start). -1 when neither is known.
func PeakRSS() int64 {
	if n := statusKB("VmHWM"); n >= 0 {
		return n << 10
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return ru.Maxrss << 10
	}
	return -1
}

func kb(n int64) int64 {
	if n < 0 {
		return -1
	}
	return n << 10
}

// ResetPeakRSS resets VmHWM to the current RSS (Linux ≥ 4.0: "5" to
// /proc/self/clear_refs) and reports whether it could.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// OpenFDs counts this process's open file descriptors, or -1.
func OpenFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1 // the directory being read
}

// Children returns the pids of the live processes (not zombies) below
// this one running bin: its children, and their descendants (mcpvisor's
// stdio servers are children of its process helper, the reaper, itself a
// child of this process).
func Children(bin string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	live := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		kids[ppid] = append(kids[ppid], pid)
		live[pid] = f[0] != "Z" && f[0] != "X"
	}
	var pids []int
	queue := append([]int(nil), kids[os.Getpid()]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], kids[pid]...)
		if !live[pid] {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")); err == nil && exe == bin {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Machine describes where a run happened.
type Machine struct {
	CPUModel   string `json:"cpuModel"`
	CPUMHz     string `json:"cpuMHz,omitempty"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"goVersion"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Kernel     string `json:"kernel"`
	MemTotal   int64  `json:"memTotalBytes"`
	Hostname   string `json:"hostname,omitempty"`
	// LoadAvg is /proc/loadavg's three averages when the run started and
	// when it ended: other work on the machine skews every figure.
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
	FDLimit      uint64 `json:"fdLimit"`
	// Commit is the mcpvisor commit measured (git rev-parse HEAD), with
	// "+dirty" when the work tree had changes.
	Commit string `json:"commit,omitempty"`
}

// DescribeMachine fills what can be known at the start of a run.
func DescribeMachine(repo string) Machine {
	m := Machine{
		Cores:        runtime.NumCPU(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
		GoVersion:    runtime.Version(),
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		LoadAvgStart: LoadAvg(),
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				if m.CPUModel == "" {
					m.CPUModel = strings.TrimSpace(v)
				}
			case "cpu MHz":
				if m.CPUMHz == "" {
					m.CPUMHz = strings.TrimSpace(v)
				}
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				m.MemTotal = n << 10
			}
		}
	}
	m.Hostname, _ = os.Hostname()
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		m.FDLimit = lim.Cur
	}
	if repo != "" {
		if out, err := exec.Command("git", "-C", repo, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
			if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
				m.Commit += "+dirty"
			}
		}
	}
	return m
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
