package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// waitingEvery is how often list and call say which servers they still
// wait for.
const waitingEvery = 2 * time.Second

// reportWaiting says, every waitingEvery until stop is called, which
// servers the command still waits for: one line "waiting for: a
// (connecting), b (reconnecting)" on stderr. Only for a person: when
// stderr is a terminal with text logs; otherwise it does nothing. The
// goroutine it starts owns nothing but its ticker; stop returns once it
// has ended, so nothing is written after.
func (a *app) reportWaiting(sup *mcpvisor.Supervisor) (stop func()) {
	if !isTerminal(a.stderr) || a.jsonLogs() {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(waitingEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if line := waitingLine(sup.Status()); line != "" {
					fmt.Fprintln(a.stderr, line)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// waitingLine names the servers not settled yet (pending, unless lazy;
// connecting; reconnecting) with their states, "" when there are none.
func waitingLine(statuses []mcpvisor.ServerStatus) string {
	var names []string
	for _, st := range statuses {
		switch {
		case st.State == mcpvisor.StateConnecting, st.State == mcpvisor.StateReconnecting,
			st.State == mcpvisor.StatePending && !st.Lazy:
			names = append(names, fmt.Sprintf("%s (%s)", st.Name, st.State))
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return "waiting for: " + strings.Join(names, ", ")
}
