package harness

import "fmt"

// The thresholds of issue 21's targets (connect at scale).
const (
	targetConnectCPU   = 0.7  // CPU to connect N servers ≤ 0.7× mcp-go's
	targetConnectSpawn = 1.15 // 1,000 stdio servers all ready ≤ 1.15× the bare spawn
	targetCallCPU21    = 0.5  // sequential tools/call client CPU ≤ 0.5× mcp-go's
	targetConnectN     = 1000
	// Per idle connection.
	targetIdleGoroutinesStdio = 2
	targetIdleGoroutinesHTTP  = 1
	targetIdleFDsStdio        = 4
)

// connectTargets checks issue 21's targets against the run's figures: the
// CPU and time to connect 1,000 servers against the Go peers, what an
// idle connection holds, and the sequential call's client CPU against
// mcp-go's. Where mcp-go does less than mcpvisor by default (no listen
// stream, no standalone GET stream), the note gives the ratio against
// mcpgo-listen, which does the same work.
func connectTargets(res *Results) []Target {
	var ts []Target
	met := func(ok bool) *bool { return &ok }
	for _, tr := range []string{TransportStdio, TransportHTTP} {
		cell := fmt.Sprintf("%s, N=%d", tr, targetConnectN)
		m := findConnect(res, Mcpvisor, tr, targetConnectN)

		cpu := Target{Name: "CPU to connect N servers ≤ 0.7× mcp-go's (issue 21)", Cell: cell, Want: "≤ 0.70×", Got: "not measured"}
		if g := findConnect(res, McpGo, tr, targetConnectN); m != nil && g != nil {
			r := m.CPUMs / g.CPUMs
			cpu.Got = fmt.Sprintf("%.2f× (mcpvisor %.0f ms, mcpgo %.0f ms)", r, m.CPUMs, g.CPUMs)
			cpu.Met = met(r <= targetConnectCPU)
			if l := findConnect(res, McpGoListen, tr, targetConnectN); l != nil {
				cpu.Note = fmt.Sprintf("against mcpgo-listen (%.0f ms), the same work: %.2f×", l.CPUMs, m.CPUMs/l.CPUMs)
			}
			if m.HelperCPUMs > 0 {
				cpu.Note = joinNote(cpu.Note, fmt.Sprintf("mcpvisor's includes its process helper's %.0f ms (the servers' fork and exec)", m.HelperCPUMs))
			}
		}
		ts = append(ts, cpu)

		ready := Target{Name: "N servers all ready ≤ the fastest Go peer's time (issue 21)", Cell: cell, Want: "≤ 1.00×", Got: "not measured"}
		var fastest *ConnectResult
		for _, p := range []string{GoSDK, McpGo, McpGoListen} {
			if c := findConnect(res, p, tr, targetConnectN); c != nil && (fastest == nil || c.AllReadyMs < fastest.AllReadyMs) {
				fastest = c
			}
		}
		if m != nil && fastest != nil {
			r := m.AllReadyMs / fastest.AllReadyMs
			ready.Got = fmt.Sprintf("%.2f× (mcpvisor %.0f ms, %s %.0f ms)", r, m.AllReadyMs, fastest.Client, fastest.AllReadyMs)
			ready.Met = met(r <= 1)
			if l := findConnect(res, McpGoListen, tr, targetConnectN); l != nil && fastest.Client != McpGoListen {
				ready.Note = fmt.Sprintf("against mcpgo-listen (%.0f ms), the same work: %.2f×", l.AllReadyMs, m.AllReadyMs/l.AllReadyMs)
			}
		}
		ts = append(ts, ready)
	}

	spawn := Target{Name: "1,000 stdio servers all ready ≤ 1.15× the bare spawn (issue 21)", Cell: fmt.Sprintf("stdio, N=%d", targetConnectN), Want: "≤ 1.15×", Got: "not measured"}
	if m, s := findConnect(res, Mcpvisor, TransportStdio, targetConnectN), findConnect(res, Spawn, TransportStdio, targetConnectN); m != nil && s != nil {
		r := m.AllReadyMs / s.AllReadyMs
		spawn.Got = fmt.Sprintf("%.2f× (mcpvisor %.0f ms, spawn %.0f ms)", r, m.AllReadyMs, s.AllReadyMs)
		spawn.Met = met(r <= targetConnectSpawn)
	}
	ts = append(ts, spawn)

	for _, tr := range []string{TransportStdio, TransportHTTP} {
		maxG := float64(targetIdleGoroutinesStdio)
		if tr == TransportHTTP {
			maxG = targetIdleGoroutinesHTTP
		}
		g := Target{Name: "goroutines per idle connection (issue 21)", Cell: tr, Want: fmt.Sprintf("≤ %.0f", maxG), Got: "not measured"}
		fd := Target{Name: "descriptors per idle stdio connection (issue 21)", Cell: tr, Want: fmt.Sprintf("≤ %d", targetIdleFDsStdio), Got: "not measured"}
		if m := largestConnect(res, Mcpvisor, tr); m != nil {
			g.Cell = fmt.Sprintf("%s, N=%d", tr, m.N)
			// The dispatcher's idle workers and a settling goroutine or two
			// are the supervisor's, whatever N: two decimals.
			g.Got = fmt.Sprintf("%.2f", m.GoroutinesPerConn)
			g.Met = met(m.GoroutinesPerConn <= maxG+0.05)
			fd.Cell = g.Cell
			fd.Got = fmt.Sprintf("%.2f", m.FDsPerConn)
			fd.Met = met(m.FDsPerConn <= targetIdleFDsStdio)
		}
		ts = append(ts, g)
		if tr == TransportStdio {
			ts = append(ts, fd)
		}
	}

	for _, tr := range []string{TransportStdio, TransportHTTP} {
		for _, era := range []string{EraModern, EraLegacy} {
			t := Target{Name: "sequential tools/call client CPU ≤ 0.5× mcp-go's (issue 21)", Cell: fmt.Sprintf("%s, %s, 16 B", tr, era), Want: "≤ 0.50×", Got: "not measured"}
			m, g := findCall(res, Mcpvisor, tr, era, 16, 1), findCall(res, McpGo, tr, era, 16, 1)
			if m != nil && g != nil {
				r := m.CPUPerCallUs / g.CPUPerCallUs
				t.Got = fmt.Sprintf("%.2f× (mcpvisor %.1f µs, mcpgo %.1f µs)", r, m.CPUPerCallUs, g.CPUPerCallUs)
				t.Met = met(r <= targetCallCPU21)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// largestConnect returns client's successful connect run of transport
// with the most servers, or nil.
func largestConnect(res *Results, client, transport string) *ConnectResult {
	var best *ConnectResult
	for i := range res.Connect {
		c := &res.Connect[i]
		if c.Client == client && c.Transport == transport && c.Error == "" && (best == nil || c.N > best.N) {
			best = c
		}
	}
	return best
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
