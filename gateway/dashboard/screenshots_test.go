package dashboard_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// envScreenshots names the directory TestDashboardScreenshots writes the
// README's screenshots to (docs/images); the test is skipped without it.
const envScreenshots = "MCPVISOR_DASHBOARD_SCREENSHOTS"

// TestDashboardScreenshots takes the screenshots of docs/dashboard.md and
// the README: the 40-server fleet with traffic (calls and some errors)
// for half a minute, one server's process killed (reconnecting), in the
// light and the dark theme; the pool with a renamed tool; the event log.
//
//	MCPVISOR_DASHBOARD_SCREENSHOTS=$PWD/docs/images go test -run TestDashboardScreenshots ./gateway/
func TestDashboardScreenshots(t *testing.T) {
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		t.Skip("set " + envScreenshots + " to a directory to take the dashboard's screenshots")
	}
	f := startFleet(t, fleetOptions{Interval: 500 * time.Millisecond, History: 60})
	ctx := browser(t)
	require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(1600, 1050)))
	openDashboard(t, ctx, f.url)

	// Traffic: a steady caller per server, faster for some, with calls
	// that time out on slow-search.
	tctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		stop()
		testwait.Call(t, "the screenshot traffic's callers to end", wg.Wait)
	}()
	call := func(server, tool string, args any, every, timeout time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			for {
				// The rate swells and ebbs, each caller on its own phase.
				phase := float64(len(server)) + time.Since(began).Seconds()/4
				pause := time.Duration(float64(every) * (1.1 + math.Sin(phase)))
				select {
				case <-tctx.Done():
					return
				case <-time.After(pause):
				}
				cctx, cancel := context.WithTimeout(tctx, timeout)
				_, _ = f.sup.CallTool(cctx, mcpvisor.QualifiedName(server, tool), args)
				cancel()
			}
		}()
	}
	for i, server := range []string{"api-01", "api-02", "api-04", "api-07", "api-11", "api-16", "team.api", "worker", fleetEdge} {
		call(server, "echo", map[string]string{"text": "hi"}, time.Duration(20+15*i)*time.Millisecond, 5*time.Second)
	}
	call("slow-search", "sleep", map[string]int{"ms": 30}, 40*time.Millisecond, 5*time.Second)
	call("slow-search", "sleep", map[string]int{"ms": 200}, 300*time.Millisecond, 100*time.Millisecond)
	time.Sleep(25 * time.Second) // testwait:ok not a wait: the traffic the screenshots show
	require.NoError(t, f.edge.Process.Kill())
	waitJS(t, ctx, 20*time.Second, "the edge row reconnecting", rowState(fleetEdge)+` === "reconnecting"`)
	time.Sleep(1500 * time.Millisecond) // testwait:ok not a wait: the reconnecting row as a person sees it

	shot := func(name string) {
		var buf []byte
		require.NoError(t, chromedp.Run(ctx, chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&buf)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf, 0o644))
	}
	scheme := func(s string) chromedp.Action {
		return emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}})
	}
	require.NoError(t, chromedp.Run(ctx, scheme("light")))
	shot("dashboard-light.png")
	require.NoError(t, chromedp.Run(ctx, scheme("dark")))
	shot("dashboard-dark.png")

	require.NoError(t, chromedp.Run(ctx, scheme("light"),
		chromedp.Click(`.tabs button[data-tab="tools"]`, chromedp.ByQuery),
		chromedp.SendKeys(`#pool-filter`, "echo", chromedp.ByQuery)))
	waitJS(t, ctx, 10*time.Second, "a renamed tool listed", `!!document.querySelector("#pool-tools li .badge.warn")`)
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll("#pool-tools li")].find((li) => li.querySelector(".badge.warn")).click()`, nil)))
	shot("dashboard-pool.png")
	require.NoError(t, chromedp.Run(ctx, scheme("dark"), chromedp.Click(`.tabs button[data-tab="events"]`, chromedp.ByQuery)))
	shot("dashboard-events.png")
}
