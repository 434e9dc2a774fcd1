package harness

import (
	"fmt"
	"slices"
)

// The thresholds of issue 6's targets.
const (
	targetSpeedup     = 1.3 // calls/s ≥ 1.3× the faster peer's
	targetCPU         = 0.6 // client CPU per call ≤ 0.6× the faster peer's
	targetFloor       = 3.0 // floor calls/s ÷ mcpvisor's ≤ 3
	targetSpawn       = 1.5 // 1,000 stdio servers all ready ≤ 1.5× the bare spawn
	targetSpawnN      = 1000
	targetIdleMemPeer = GoSDK // idle memory per connection ≤ the official SDK's
)

// findCall returns the batch of the given coordinates that succeeded, or
// nil.
func findCall(res *Results, client, transport, era string, payload, inFlight int) *CallResult {
	for i := range res.Call {
		c := &res.Call[i]
		if c.Client == client && c.Transport == transport && c.Era == era && c.PayloadBytes == payload && c.InFlight == inFlight && c.Error == "" && c.Calls > 0 {
			return c
		}
	}
	return nil
}

// fasterPeer returns the peer batch with the most calls/s at the same
// coordinates as m, or nil.
func fasterPeer(res *Results, m *CallResult) *CallResult {
	var best *CallResult
	for _, p := range []string{GoSDK, McpGo} {
		if c := findCall(res, p, m.Transport, m.Era, m.PayloadBytes, m.InFlight); c != nil && (best == nil || c.CallsPerSec > best.CallsPerSec) {
			best = c
		}
	}
	return best
}

// leanerPeer returns the peer batch with the least CPU per call at the
// same coordinates as m, or nil.
func leanerPeer(res *Results, m *CallResult) *CallResult {
	var best *CallResult
	for _, p := range []string{GoSDK, McpGo} {
		if c := findCall(res, p, m.Transport, m.Era, m.PayloadBytes, m.InFlight); c != nil && (best == nil || c.CPUPerCallUs < best.CPUPerCallUs) {
			best = c
		}
	}
	return best
}

// findConnect returns the successful connect run of the given coordinates,
// or nil.
func findConnect(res *Results, client, transport string, n int) *ConnectResult {
	for i := range res.Connect {
		c := &res.Connect[i]
		if c.Client == client && c.Transport == transport && c.N == n && c.Error == "" {
			return c
		}
	}
	return nil
}

func inFlightName(n int) string {
	if n == 1 {
		return "sequential"
	}
	return fmt.Sprintf("%d in flight", n)
}

// EvaluateTargets checks issue 6's targets against the run's figures.
// A target the run did not measure has Met nil.
func EvaluateTargets(res *Results) []Target {
	var ts []Target
	met := func(ok bool) *bool { return &ok }
	eras := []string{}
	for _, c := range res.Call {
		if c.Client == Mcpvisor && !slices.Contains(eras, c.Era) {
			eras = append(eras, c.Era)
		}
	}
	for _, tr := range []string{TransportStdio, TransportHTTP} {
		for _, era := range eras {
			for _, n := range []int{1, 32} {
				cell := fmt.Sprintf("%s, %s, 16 B, %s", tr, era, inFlightName(n))
				speed := Target{Name: "calls/s ≥ 1.3× the faster peer", Cell: cell, Want: "≥ 1.30×"}
				cpu := Target{Name: "client CPU per call ≤ 0.6× the faster peer's", Cell: cell, Want: "≤ 0.60×"}
				m := findCall(res, Mcpvisor, tr, era, 16, n)
				var p *CallResult
				if m != nil {
					p = fasterPeer(res, m)
				}
				if m == nil || p == nil {
					speed.Got, cpu.Got = "not measured", "not measured"
				} else {
					r := m.CallsPerSec / p.CallsPerSec
					speed.Got = fmt.Sprintf("%.2f× (mcpvisor %s/s, %s %s/s)", r, thousands(m.CallsPerSec), p.Client, thousands(p.CallsPerSec))
					speed.Met = met(r >= targetSpeedup)
					c := m.CPUPerCallUs / p.CPUPerCallUs
					cpu.Got = fmt.Sprintf("%.2f× (mcpvisor %.1f µs, %s %.1f µs)", c, m.CPUPerCallUs, p.Client, p.CPUPerCallUs)
					cpu.Met = met(c <= targetCPU)
					if l := leanerPeer(res, m); l != nil && l.Client != p.Client {
						cpu.Note = fmt.Sprintf("the leaner peer, %s (%.1f µs), gives %.2f×", l.Client, l.CPUPerCallUs, m.CPUPerCallUs/l.CPUPerCallUs)
					}
				}
				ts = append(ts, speed, cpu)
			}
		}
	}
	for _, tr := range []string{TransportStdio, TransportHTTP} {
		for _, era := range eras {
			for _, n := range []int{1, 32} {
				t := Target{Name: "within 3× of the bare echo floor (floor calls/s ÷ mcpvisor's)", Cell: fmt.Sprintf("%s, %s, 16 B, %s", tr, era, inFlightName(n)), Want: "≤ 3.00×"}
				m, f := findCall(res, Mcpvisor, tr, era, 16, n), findCall(res, Floor, tr, "", 16, n)
				if m == nil || f == nil {
					t.Got = "not measured"
				} else {
					r := f.CallsPerSec / m.CallsPerSec
					t.Got = fmt.Sprintf("%.2f× (floor %s/s, mcpvisor %s/s)", r, thousands(f.CallsPerSec), thousands(m.CallsPerSec))
					t.Met = met(r <= targetFloor)
				}
				ts = append(ts, t)
			}
		}
	}

	spawn := Target{Name: "1,000 stdio servers all ready ≤ 1.5× the bare spawn of 1,000 processes (same pool)", Want: "≤ 1.50×"}
	if m, s := findConnect(res, Mcpvisor, TransportStdio, targetSpawnN), findConnect(res, Spawn, TransportStdio, targetSpawnN); m != nil && s != nil {
		r := m.AllReadyMs / s.AllReadyMs
		spawn.Cell = fmt.Sprintf("stdio, N=%d, pool %d", targetSpawnN, m.Pool)
		spawn.Got = fmt.Sprintf("%.2f× (mcpvisor %.0f ms, spawn %.0f ms)", r, m.AllReadyMs, s.AllReadyMs)
		spawn.Met = met(r <= targetSpawn)
	} else {
		spawn.Cell = fmt.Sprintf("stdio, N=%d", targetSpawnN)
		spawn.Got = "not measured"
		spawn.Note = "N=1,000 was not run (-large adds it)"
		largest := 0
		for _, c := range res.Connect {
			if c.Client == Mcpvisor && c.Transport == TransportStdio && c.Error == "" && findConnect(res, Spawn, TransportStdio, c.N) != nil {
				largest = max(largest, c.N)
			}
		}
		if largest > 0 {
			m, s := findConnect(res, Mcpvisor, TransportStdio, largest), findConnect(res, Spawn, TransportStdio, largest)
			spawn.Note += fmt.Sprintf("; for information, at N=%d: %.2f× (mcpvisor %.0f ms, spawn %.0f ms)", largest, m.AllReadyMs/s.AllReadyMs, m.AllReadyMs, s.AllReadyMs)
		}
	}
	ts = append(ts, spawn)

	for _, tr := range []string{TransportStdio, TransportHTTP} {
		t := Target{Name: "client memory per idle connection ≤ go-sdk's (heap growth per connection)", Want: "≤ 1.00×"}
		largest := 0
		for _, c := range res.Connect {
			if c.Client == Mcpvisor && c.Transport == tr && c.Error == "" && findConnect(res, targetIdleMemPeer, tr, c.N) != nil {
				largest = max(largest, c.N)
			}
		}
		if largest == 0 {
			t.Cell, t.Got = tr, "not measured"
		} else {
			m, g := findConnect(res, Mcpvisor, tr, largest), findConnect(res, targetIdleMemPeer, tr, largest)
			t.Cell = fmt.Sprintf("%s, %s, N=%d", tr, m.Era, largest)
			t.Got = fmt.Sprintf("%.2f× (mcpvisor %s, gosdk %s per connection)", m.HeapPerConn/g.HeapPerConn, bytesName(m.HeapPerConn), bytesName(g.HeapPerConn))
			t.Met = met(m.HeapPerConn <= g.HeapPerConn)
		}
		ts = append(ts, t)
	}
	ts = append(ts, connectTargets(res)...)
	return append(ts, sandboxTargets(res)...)
}
