// Command cluster benchmarks package cluster with real processes on this
// machine: one mock process serving -servers virtual MCP servers
// (/mcp/s00, /mcp/s01, …) and -members clustermember processes that
// share them. It measures, in order:
//
//   - the time until every server is ready (from the members' own
//     events), and each member's memory (RSS, peak RSS, Go heap,
//     goroutines), and one cluster-wide overview through member 0;
//   - the idle cost of the cluster (CPU and syscall bytes per member
//     over -idle: gossip, membership polls);
//   - calls per second through member 0 and through every member at
//     once (POST /load, run inside each member), and the cost of a call
//     that crosses members against a local one (latency and CPU of
//     every process, per call);
//   - the time until every server of the last member is ready on a
//     survivor after a kill -9 of it.
//
// It prints a Markdown table, and the figures as JSON with -json.
//
//	go run ./bench/cluster -servers 10000 -members 3
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// config is the command line.
type config struct {
	servers, members, workers int
	duration, idle, timeout   time.Duration
	jsonOut, logs             string
	mcpvisor, member          string
}

func main() {
	var c config
	flag.IntVar(&c.servers, "servers", 300, "virtual servers on the mock")
	flag.IntVar(&c.members, "members", 3, "member processes")
	flag.IntVar(&c.workers, "workers", 8, "calling goroutines per member during a load phase")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "length of each load phase (at most 1m)")
	flag.DurationVar(&c.idle, "idle", 5*time.Second, "length of the idle measurement")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "deadline of each wait (all ready, re-homed)")
	flag.StringVar(&c.jsonOut, "json", "", "also write the figures as JSON to this file")
	flag.StringVar(&c.logs, "logs", "", "write the members' and the mock's stderr to files in this directory")
	flag.StringVar(&c.mcpvisor, "mcpvisor", "", "mcpvisor binary (default: go build ./cmd/mcpvisor)")
	flag.StringVar(&c.member, "member", "", "clustermember binary (default: go build ./cluster/internal/clustermember)")
	flag.Parse()
	if c.servers < 1 || c.members < 2 || c.workers < 1 {
		fmt.Fprintln(os.Stderr, "cluster: -servers ≥ 1, -members ≥ 2, -workers ≥ 1")
		os.Exit(2)
	}
	res, err := run(c)
	if res != nil {
		printTable(os.Stdout, c, res)
		if c.jsonOut != "" {
			b, _ := json.MarshalIndent(res, "", "  ")
			if werr := os.WriteFile(c.jsonOut, b, 0o644); werr != nil {
				fmt.Fprintln(os.Stderr, "cluster:", werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// logFile opens dir/name for a process's stderr (io.Discard without dir).
func logFile(dir, name string) (io.Writer, func()) {
	if dir == "" {
		return io.Discard, func() {}
	}
	f, err := os.Create(dir + "/" + name)
	if err != nil {
		return io.Discard, func() {}
	}
	return f, func() { _ = f.Close() }
}

// run is the whole benchmark; it returns what it measured so far even
// when a step fails.
func run(c config) (*results, error) {
	raiseFileLimit()
	if c.mcpvisor == "" || c.member == "" {
		dir, err := os.MkdirTemp("", "cluster-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		mv, mb, err := buildBinaries(dir)
		if err != nil {
			return nil, err
		}
		if c.mcpvisor == "" {
			c.mcpvisor = mv
		}
		if c.member == "" {
			c.member = mb
		}
	}
	if c.logs != "" {
		if err := os.MkdirAll(c.logs, 0o755); err != nil {
			return nil, err
		}
	}
	mockLog, closeMockLog := logFile(c.logs, "mock.log")
	defer closeMockLog()
	mockURL, mockCmd, stopMock, err := startMock(c.mcpvisor, mockLog)
	if err != nil {
		return nil, err
	}
	defer stopMock()

	ports := make([]int, 0, 2*c.members)
	for seen := map[int]bool{}; len(ports) < 2*c.members; {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	var peers string
	for i := range c.members {
		if i > 0 {
			peers += ","
		}
		peers += fmt.Sprintf("127.0.0.1:%d", ports[c.members+i])
	}
	pl := newPlacement()
	events := make(chan event, 4096)
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		for ev := range events {
			pl.add(ev)
		}
	}()
	members := make([]*member, c.members)
	defer func() {
		for _, m := range members {
			if m != nil {
				_ = m.kill()
			}
		}
	}()
	res := &results{Servers: c.servers, Members: c.members}
	start := time.Now()
	type started struct {
		m   *member
		err error
	}
	out := make(chan started, c.members)
	for i := range c.members {
		errLog, closeLog := logFile(c.logs, fmt.Sprintf("member-%d.log", i))
		defer closeLog()
		args := []string{"-port", fmt.Sprint(ports[i]), "-provider-port", fmt.Sprint(ports[c.members+i]),
			"-peers", peers, "-mock", mockURL, "-servers", fmt.Sprint(c.servers)}
		if c.logs != "" {
			args = append(args, "-log")
		}
		go func() {
			m, err := startMember(c.member, i, args, events, errLog)
			out <- started{m, err}
		}()
	}
	var startErr error
	for range c.members {
		s := <-out // each startMember ends within 60 s
		if s.err != nil {
			startErr = errors.Join(startErr, s.err)
			continue
		}
		members[s.m.index] = s.m
	}
	if startErr != nil {
		return nil, startErr
	}

	// 1. Every server ready.
	if err := waitFor(c.timeout, fmt.Sprintf("all %d servers ready", c.servers), func() bool {
		n, _ := pl.ready()
		return n == c.servers
	}); err != nil {
		n, _ := pl.ready()
		return res, fmt.Errorf("%w (%d ready)", err, n)
	}
	_, last := pl.ready()
	res.AllReadyMS = ms(last.Sub(start))
	if err := waitFor(c.timeout, "no activation or release for 3 s", func() bool {
		return time.Since(pl.quietSince()) > 3*time.Second
	}); err != nil {
		return res, err
	}
	ctx := context.Background()
	for _, m := range members {
		mm, err := measureMember(ctx, m, len(pl.on(m.id)))
		if err != nil {
			return res, err
		}
		res.Memory = append(res.Memory, mm)
	}
	res.MockRSS, _ = procStatus(mockCmd.Process.Pid, "VmRSS")
	res.MockFiles = openFiles(mockCmd.Process.Pid)
	res.Overview = measureOverview(ctx, members[0])

	// 2. Idle cost.
	idle, err := measureIdle(members, c.idle)
	if err != nil {
		return res, err
	}
	res.Idle = idle

	// 3. Calls.
	all := make([]string, 0, c.servers)
	for i := range c.servers {
		all = append(all, fmt.Sprintf("s%02d", i))
	}
	local := pl.on(members[0].id)
	var remote []string
	for _, m := range members[1:] {
		remote = append(remote, pl.on(m.id)...)
	}
	pids := []int{mockCmd.Process.Pid}
	for _, m := range members {
		pids = append(pids, m.cmd.Process.Pid)
	}
	phases := []struct {
		name    string
		through []*member
		servers []string
	}{
		{"local: member 0 → its own servers", members[:1], local},
		{"cross: member 0 → other members' servers", members[:1], remote},
		{"one member: member 0 → every server", members[:1], all},
		{"all members: each → every server", members, all},
	}
	for _, ph := range phases {
		if len(ph.servers) == 0 {
			res.Loads = append(res.Loads, loadFigures{Phase: ph.name, Note: "no server in this set"})
			continue
		}
		lf, err := runLoad(ctx, ph.name, ph.through, ph.servers, c.workers, c.duration, pids, members[0].cmd.Process.Pid)
		if err != nil {
			return res, err
		}
		res.Loads = append(res.Loads, lf)
	}

	// 4. kill -9 of the last member.
	victim := members[len(members)-1]
	moved := pl.on(victim.id)
	res.Rehome.Servers = len(moved)
	killedAt := time.Now()
	if err := victim.kill(); err != nil {
		return res, err
	}
	members[len(members)-1] = nil
	pl.died(victim.id)
	if err := waitFor(c.timeout, fmt.Sprintf("the killed member's %d servers ready on a survivor", len(moved)), func() bool {
		return len(pl.readyElsewhere(moved, victim.id, killedAt)) == len(moved)
	}); err != nil {
		res.Rehome.Done = len(pl.readyElsewhere(moved, victim.id, killedAt))
		return res, err
	}
	at := pl.readyElsewhere(moved, victim.id, killedAt)
	res.Rehome.Done = len(at)
	res.Rehome.Histogram = perSecond(at, killedAt)
	res.Rehome.FirstMS, res.Rehome.MedianMS, res.Rehome.P90MS, res.Rehome.LastMS = spread(at, killedAt)
	for _, m := range members[:len(members)-1] {
		hwm, _ := procStatus(m.cmd.Process.Pid, "VmHWM")
		res.Rehome.SurvivorPeakRSS = append(res.Rehome.SurvivorPeakRSS, hwm)
	}
	res.Overlaps = pl.overlapCount()
	for i, m := range members {
		if m != nil {
			if err := m.kill(); err != nil {
				return res, err
			}
			members[i] = nil
		}
	}
	close(events) // every member's reader has ended (kill waits for it)
	<-feedDone
	return res, nil
}

// waitFor polls cond every 100 ms until it holds or d passes.
func waitFor(d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
