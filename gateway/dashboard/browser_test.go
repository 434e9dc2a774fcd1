package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/channels"
)

// envRequireBrowser makes the browser tests fail, instead of skip, when
// no Chromium is found (make test sets it; the deps target installs
// Debian's chromium).
const envRequireBrowser = "MCPVISOR_REQUIRE_BROWSER"

// chromiumPath finds the browser: $MCPVISOR_CHROMIUM, else chromium or
// chromium-browser on PATH.
func chromiumPath() string {
	if p := os.Getenv("MCPVISOR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless Chromium with a fresh profile, for the test's
// life; every action on the returned context has the test's deadline.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv(envRequireBrowser) != "" {
			t.Fatal("no Chromium found (install Debian's chromium: make deps)")
		}
		t.Skip("no Chromium found; set " + envRequireBrowser + "=1 to make this a failure")
	}
	// A fresh profile; removed once the browser is gone (its helper
	// processes may write to it for a moment after the main one ends,
	// which t.TempDir's cleanup would fail on).
	profile, err := os.MkdirTemp("", "mcpvisor-chromium-")
	require.NoError(t, err)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1600, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// The pinned cdproto predates some of this Chromium's enum values;
	// events it cannot decode are none the tests use.
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithErrorf(func(string, ...any) {}))
	deadline := 3 * time.Minute
	if d, ok := t.Deadline(); ok && time.Until(d) < deadline+10*time.Second {
		deadline = time.Until(d) - 10*time.Second
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, deadline)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := os.RemoveAll(profile)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("removing the browser profile %s: %v", profile, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	require.NoError(t, chromedp.Run(ctx), "starting Chromium at %s", path)
	return ctx
}

// pageErrors collects the page's uncaught exceptions and console errors
// (a Content-Security-Policy violation is one) from now on.
type pageErrors struct {
	mu   sync.Mutex
	errs []string
}

func watchErrors(ctx context.Context) *pageErrors {
	pe := &pageErrors{}
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				for _, a := range e.Args {
					msg += string(a.Value) + " " + a.Description
				}
			}
		}
		if msg != "" {
			pe.mu.Lock()
			pe.errs = append(pe.errs, msg)
			pe.mu.Unlock()
		}
	})
	return pe
}

func (pe *pageErrors) check(t *testing.T) {
	t.Helper()
	pe.mu.Lock()
	defer pe.mu.Unlock()
	assert.Empty(t, pe.errs, "the page reported errors")
}

// waitJS evaluates expr every 50 ms until it is true, or fails the test
// after within, saying what it waited for.
func waitJS(t *testing.T, ctx context.Context, within time.Duration, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		var ok bool
		err := chromedp.Run(ctx, chromedp.Evaluate(expr, &ok))
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waited %v for %s (%s) %s", within, what, expr, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rowState is the expression of the state a server's row shows.
func rowState(name string) string {
	return `(document.querySelector('#servers tr[data-server=' + CSS.escape(` + jsString(name) + `) + ']') || {dataset: {}}).dataset.state`
}

// openDashboard loads the dashboard and waits for its 40 rows.
func openDashboard(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(url+"/")))
	waitJS(t, ctx, 30*time.Second, "the 40 server rows", `document.querySelectorAll("#servers tr[data-server]").length === 40`)
	waitJS(t, ctx, 10*time.Second, "the stream to be live", `document.getElementById("conn").dataset.state === "live"`)
}

// click clicks the button of a server's row.
func click(t *testing.T, ctx context.Context, server, action string) {
	t.Helper()
	sel := fmt.Sprintf(`#servers tr[data-server=%q] button[data-action=%q]`, server, action)
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(sel, chromedp.ByQuery)), "clicking %s", sel)
}

// The dashboard shows every server of a 40-server config, each in its
// state in words (and a colour class), with no script error or CSP
// violation, under a strict Content-Security-Policy.
func TestDashboardLoads(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	ctx := browser(t)
	errs := watchErrors(ctx)
	openDashboard(t, ctx, f.url)

	for name, want := range map[string]string{
		"api-01": "ready", fleetAuth: "needs-auth", fleetHeld: "needs-approval", "broken-cmd": "failed",
		"legacy-off": "disabled", "lazy-docs": "pending",
	} {
		waitJS(t, ctx, 15*time.Second, name+" shown "+want, rowState(name)+` === `+jsString(want))
	}
	var words map[string]string
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll("#servers tr[data-server]")].map(
		(tr) => [tr.dataset.server, tr.querySelector(".c-state .state").textContent]))`, &words)))
	assert.Equal(t, "needs login", words[fleetAuth])
	assert.Equal(t, "needs approval", words[fleetHeld])
	assert.Equal(t, "failed", words["broken-cmd"])
	assert.Len(t, words, fleetSize)
	var approvalNote string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(`#servers tr[data-server="project-db"] .state-note`, &approvalNote, chromedp.ByQuery)))
	assert.Contains(t, approvalNote, "mcpvisor trust")

	res, err := client.Get(f.url + "/")
	require.NoError(t, err)
	res.Body.Close()
	csp := res.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "script-src 'self'")
	assert.NotContains(t, csp, "unsafe-inline")
	errs.check(t)
}

// recordStates has the page record every state the row of server shows
// from now on, in window.__shown[server].
func recordStates(t *testing.T, ctx context.Context, server string) {
	t.Helper()
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`(() => {
		window.__noReload = true;
		window.__shown = window.__shown || {};
		const name = `+jsString(server)+`;
		const tr = document.querySelector('#servers tr[data-server=' + CSS.escape(name) + ']');
		window.__shown[name] = [tr.dataset.state];
		new MutationObserver(() => window.__shown[name].push(tr.dataset.state)).observe(tr, {attributes: true, attributeFilter: ["data-state"]});
	})()`, nil)))
}

// Killed servers come back on the page without a reload: the Streamable
// HTTP server's process is killed (its row turns reconnecting, with the
// attempt and the next retry counting down) and started again (ready);
// the stdio server's process is killed (its row leaves ready: the
// supervisor starts it again at once) and comes back ready.
func TestDashboardKilledServerReconnects(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	ctx := browser(t)
	errs := watchErrors(ctx)
	openDashboard(t, ctx, f.url)
	waitJS(t, ctx, 15*time.Second, fleetWorker+" ready", rowState(fleetWorker)+` === "ready"`)
	waitJS(t, ctx, 15*time.Second, fleetEdge+" ready", rowState(fleetEdge)+` === "ready"`)
	recordStates(t, ctx, fleetEdge)
	recordStates(t, ctx, fleetWorker)

	// The HTTP server's process dies: reconnecting, with a countdown.
	require.NoError(t, f.edge.Process.Kill())
	waitJS(t, ctx, 20*time.Second, "the edge row to show reconnecting", rowState(fleetEdge)+` === "reconnecting"`)
	waitJS(t, ctx, 20*time.Second, "the edge row's attempt and countdown",
		`/attempt \d+ · (in [\d.]+s|now)/.test(document.querySelector('#servers tr[data-server="edge-proc"] .c-retry').textContent)`)
	startEdge(t, f.edgeAddr)
	waitJS(t, ctx, 30*time.Second, "the edge row to show ready again", rowState(fleetEdge)+` === "ready"`)

	// The stdio server's process dies.
	pid := serverPID(t, f.sup, fleetWorker)
	require.NoError(t, killProcess(pid))
	waitJS(t, ctx, 20*time.Second, "the worker row to leave ready", `window.__shown.worker.some((s) => s !== "ready")`)
	waitJS(t, ctx, 20*time.Second, "the worker row to show ready again", `window.__shown.worker.at(-1) === "ready"`)

	var shown map[string][]string
	var same bool
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`window.__shown`, &shown), chromedp.Evaluate(`window.__noReload === true`, &same)))
	assert.True(t, same, "the page was reloaded")
	t.Logf("the rows showed: %v", shown)
	assert.Contains(t, shown[fleetEdge], "reconnecting")
	assert.NotEqual(t, pid, serverPID(t, f.sup, fleetWorker), "a new worker process")
	errs.check(t)
}

// The row buttons act, as the supervisor tells: turn off, turn on,
// reconnect one, reconnect all, reload.
func TestDashboardActions(t *testing.T) {
	var reloads sync.WaitGroup
	reloaded := make(chan struct{}, 1)
	reloads.Add(1)
	f := startFleet(t, fleetOptions{Reload: func(context.Context) error {
		select {
		case reloaded <- struct{}{}:
		default:
		}
		return nil
	}})
	ctx := browser(t)
	errs := watchErrors(ctx)
	openDashboard(t, ctx, f.url)

	// Turn off, then on.
	click(t, ctx, "api-03", "toggle")
	f.waitToggled(t, "api-03", true, 10*time.Second)
	waitJS(t, ctx, 10*time.Second, "api-03 shown off", rowState("api-03")+` === "off"`)
	click(t, ctx, "api-03", "toggle")
	f.waitToggled(t, "api-03", false, 10*time.Second)
	waitJS(t, ctx, 10*time.Second, "api-03 shown ready", rowState("api-03")+` === "ready"`)
	assert.NotZero(t, f.status(t, "api-03").OfferedTools)

	// Reconnect one: the supervisor reports api-04 leaving ready and
	// coming back.
	seq, err := f.sup.LastSeq(t.Context())
	require.NoError(t, err)
	events := f.sup.Subscribe(t.Context(), mcpvisor.FromSequence(seq))
	click(t, ctx, "api-04", "reconnect")
	waitEvents(t, events, 15*time.Second, "api-04 to reconnect", func(ev mcpvisor.Event, seen map[string]bool) bool {
		if ev, ok := ev.(*mcpvisor.ServerStateEvent); ok && ev.Server == "api-04" {
			seen[string(ev.State)] = true
		}
		return seen["ready"] && (seen["reconnecting"] || seen["connecting"])
	})

	// Reconnect all.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#reconnect-all`, chromedp.ByQuery)))
	waitEvents(t, events, 20*time.Second, "every ready server to reconnect", func(ev mcpvisor.Event, seen map[string]bool) bool {
		if ev, ok := ev.(*mcpvisor.ServerStateEvent); ok && ev.State == mcpvisor.StateReady && ev.Server != "api-04" {
			seen[ev.Server] = true
		}
		return seen["api-01"] && seen["api-25"] && seen[fleetWorker]
	})

	// Reload.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#reload`, chromedp.ByQuery)))
	select {
	case <-reloaded:
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10s for the reload button to reload")
	}
	waitJS(t, ctx, 10*time.Second, "the reload's notice", `document.getElementById("notice").textContent.includes("Reload config: done")`)
	errs.check(t)
}

// waitEvents reads events until done says so.
func waitEvents(t *testing.T, events <-chan mcpvisor.Event, within time.Duration, what string, done func(mcpvisor.Event, map[string]bool) bool) {
	t.Helper()
	seen := map[string]bool{}
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the event stream ended while waiting for %s", what)
			}
			if done(ev, seen) {
				return
			}
		case <-timeout:
			t.Fatalf("waited %v for %s; saw %v", within, what, seen)
		}
	}
}

// With a token, the page asks for it, exchanges it for an HttpOnly,
// SameSite=Strict cookie, and works; requests without the cookie (or
// token) are refused, the cookie does not open the MCP endpoint, and a
// cross-origin POST with it is refused.
func TestDashboardTokenLogin(t *testing.T) {
	const token = "s3cret-gateway-token"
	f := startFleet(t, fleetOptions{Token: token})
	ctx := browser(t)
	errs := watchErrors(ctx)

	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(f.url+"/")))
	waitJS(t, ctx, 10*time.Second, "the token form", `!!document.querySelector("form.login-form input[name=token]")`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`#token`, "wrong", chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery)))
	waitJS(t, ctx, 10*time.Second, "the wrong token refused", `location.search.includes("denied") && !document.getElementById("denied").hidden`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SendKeys(`#token`, token, chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery)))
	waitJS(t, ctx, 30*time.Second, "the dashboard after login", `document.querySelectorAll("#servers tr[data-server]").length === 40`)
	waitJS(t, ctx, 10*time.Second, "the stream to be live", `document.getElementById("conn").dataset.state === "live"`)

	var cookies []*network.Cookie
	require.NoError(t, chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{f.url}).Do(ctx)
		return err
	})))
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.True(t, c.HTTPOnly, "HttpOnly")
	assert.Equal(t, network.CookieSameSiteStrict, c.SameSite)
	assert.NotContains(t, c.Value, token)
	var visible string
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`document.cookie + location.href`, &visible)))
	assert.NotContains(t, visible, token, "the token in a URL or a script-visible cookie")

	// The page's actions work with the cookie.
	click(t, ctx, "api-05", "toggle")
	f.waitToggled(t, "api-05", true, 10*time.Second)

	get := func(path string, header http.Header) int {
		req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		res, err := client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	withCookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	for _, path := range []string{"/status", "/admin/pool", "/admin/channels", "/events?after=0"} {
		if path == "/events?after=0" {
			continue // a stream; /status stands for it
		}
		assert.Equal(t, http.StatusUnauthorized, get(path, nil), "%s without the cookie", path)
		assert.Equal(t, http.StatusOK, get(path, withCookie), "%s with the cookie", path)
		assert.Equal(t, http.StatusOK, get(path, http.Header{"Authorization": {"Bearer " + token}}), "%s with the token", path)
	}
	assert.Equal(t, http.StatusUnauthorized, get("/admin/stream", nil))
	assert.Equal(t, http.StatusUnauthorized, get("/admin/stream", http.Header{"Cookie": {c.Name + "=forged"}}))
	// The cookie is no key to the MCP endpoint.
	req, _ := http.NewRequest(http.MethodPost, f.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", c.Name+"="+c.Value)
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "/mcp with the cookie")
	// Nor does it let another origin act.
	post := func(origin string) int {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/admin/servers/api-06/toggle", strings.NewReader(`{"on":false}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", c.Name+"="+c.Value)
		req.Header.Set("Origin", origin)
		res, err := client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusForbidden, post("http://localhost:1"), "another loopback origin")
	assert.Equal(t, http.StatusForbidden, post("https://evil.example"), "another site")
	assert.False(t, f.status(t, "api-06").ToggledOff)
	assert.Equal(t, http.StatusOK, post(f.url), "the dashboard's own origin")
	assert.True(t, f.status(t, "api-06").ToggledOff)

	// Log out: the cookie stops working.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`#logout`, chromedp.ByQuery)))
	waitJS(t, ctx, 10*time.Second, "the token form after logout", `!!document.querySelector("form.login-form")`)
	assert.Equal(t, http.StatusUnauthorized, get("/status", withCookie), "/status with the cookie after logout")
	errs.check(t)
}

// A burst of 5,000 events leaves the page responsive: it shows the last
// one, and a click on a tab still works. The main thread's time over the
// burst is measured (Performance.getMetrics: task, script, layout and
// style time) and reported, not asserted.
func TestDashboardEventBurst(t *testing.T) {
	const burst = 5000
	f := startFleet(t, fleetOptions{})
	ctx := browser(t)
	errs := watchErrors(ctx)
	openDashboard(t, ctx, f.url)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`.tabs button[data-tab="events"]`, chromedp.ByQuery),
		performance.Enable(),
		chromedp.Evaluate(`(() => {
			window.__longest = 0; window.__long = 0;
			Object.assign(window.mcpvisorDashboard.stats, {flushes: 0, flushMaxMs: 0, flushTotalMs: 0});
			new PerformanceObserver((l) => { for (const e of l.getEntries()) { window.__long++; window.__longest = Math.max(window.__longest, e.duration); } })
				.observe({type: "longtask", buffered: false});
		})()`, nil)))
	before := mainThread(t, ctx)
	start := time.Now()
	res, err := f.sup.CallTool(t.Context(), "mcp__"+strings.ReplaceAll(fleetChannel, "-", "-")+"__channel_burst", map[string]any{"n": burst, "prefix": "burst-"})
	require.NoError(t, err)
	require.False(t, res.IsError)
	last, err := f.sup.LastSeq(t.Context())
	require.NoError(t, err)
	waitJS(t, ctx, 60*time.Second, fmt.Sprintf("the page's cursor to reach %d", last), fmt.Sprintf(`window.mcpvisorDashboard.cursor() >= %d`, last))
	waitJS(t, ctx, 10*time.Second, "the last message in the log", `document.querySelector("#events tr[data-type=channel_message] td.details").textContent === "burst-`+fmt.Sprint(burst)+`"`)
	elapsed := time.Since(start)
	after := mainThread(t, ctx)
	// Responsive: a click switches the tab at once.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`.tabs button[data-tab="servers"]`, chromedp.ByQuery)))
	waitJS(t, ctx, 5*time.Second, "the servers tab after the burst", `!document.getElementById("tab-servers").hidden`)
	var long struct {
		Count   int     `json:"count"`
		Longest float64 `json:"longest"`
		Gaps    int     `json:"gaps"`
		Events  int     `json:"events"`
		Stats   struct {
			Flushes    int     `json:"flushes"`
			FlushMaxMs float64 `json:"flushMaxMs"`
			FlushTotal float64 `json:"flushTotalMs"`
		} `json:"stats"`
	}
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`({count: window.__long, longest: window.__longest,
		gaps: window.mcpvisorDashboard.log().filter((e) => e.type === "gap").length, events: window.mcpvisorDashboard.log().length, stats: window.mcpvisorDashboard.stats})`, &long)))
	t.Logf("burst of %d events: on the page within %v; main thread: task %.0f ms, script %.0f ms, layout %.0f ms, style %.0f ms; "+
		"long tasks (>50 ms): %d, longest %.0f ms; gaps in the log: %d; events held: %d; renders %d, longest %.1f ms, total %.0f ms",
		burst, elapsed.Round(time.Millisecond), 1000*(after["TaskDuration"]-before["TaskDuration"]), 1000*(after["ScriptDuration"]-before["ScriptDuration"]),
		1000*(after["LayoutDuration"]-before["LayoutDuration"]), 1000*(after["RecalcStyleDuration"]-before["RecalcStyleDuration"]),
		long.Count, long.Longest, long.Gaps, long.Events, long.Stats.Flushes, long.Stats.FlushMaxMs, long.Stats.FlushTotal)
	errs.check(t)
}

// mainThread returns the page's Performance.getMetrics, by name.
func mainThread(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	require.NoError(t, chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		ms, err := performance.GetMetrics().Do(ctx)
		for _, m := range ms {
			out[m.Name] = m.Value
		}
		return err
	})))
	return out
}

// The channel view shows a pending permission request with answer
// buttons; Allow settles it (the host's prompt gets the verdict), and the
// servers' channel messages are listed.
func TestDashboardChannels(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	ctx := browser(t)
	errs := watchErrors(ctx)
	openDashboard(t, ctx, f.url)
	_, err := f.sup.CallTool(t.Context(), mcpvisor.QualifiedName(fleetChannel, "channel_burst"), map[string]any{"n": 3, "prefix": "hello-"})
	require.NoError(t, err)
	prompt, sentTo, err := f.sup.Channels().RequestPermission(t.Context(), channels.PermissionRequest{
		ToolName: "Bash", Description: "rm -rf build/", InputPreview: `{"command":"rm -rf build/"}`})
	require.NoError(t, err)
	assert.Equal(t, []string{fleetChannel}, sentTo)

	require.NoError(t, chromedp.Run(ctx, chromedp.Click(`.tabs button[data-tab="channels"]`, chromedp.ByQuery)))
	row := `#perms tr[data-permission=` + jsString(prompt.ID) + `]`
	waitJS(t, ctx, 10*time.Second, "the permission request's row", `!!document.querySelector(`+jsString(row)+`)`)
	waitJS(t, ctx, 10*time.Second, "the channel messages", `[...document.querySelectorAll("#channel td")].some((td) => td.textContent === "hello-3")`)
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(row+` button[data-answer="allow"]`, chromedp.ByQuery)))
	wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	answer, err := prompt.Wait(wctx)
	require.NoError(t, err, "waiting for the page's answer")
	assert.True(t, answer.Allow)
	assert.Empty(t, answer.By, "answered by the host (the dashboard)")
	waitJS(t, ctx, 10*time.Second, "the answered request to leave the list", `!document.querySelector(`+jsString(row)+`)`)
	errs.check(t)
}

// The event log survives a reload of the page: the events it had are
// still there, the ones that happened meanwhile are added after them
// (resumed at the page's cursor), with nothing lost or doubled; and the
// log filters by server and type.
func TestDashboardLogResumes(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	ctx := browser(t)
	errs := watchErrors(ctx)
	openDashboard(t, ctx, f.url)
	burst := func(prefix string) uint64 {
		_, err := f.sup.CallTool(t.Context(), mcpvisor.QualifiedName(fleetChannel, "channel_burst"), map[string]any{"n": 20, "prefix": prefix})
		require.NoError(t, err)
		last, err := f.sup.LastSeq(t.Context())
		require.NoError(t, err)
		return last
	}
	first := burst("before-")
	waitJS(t, ctx, 10*time.Second, "the first burst on the page", fmt.Sprintf(`window.mcpvisorDashboard.cursor() >= %d`, first))
	// Away from the page (it saves its log and cursor), events happen.
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate("about:blank")))
	second := burst("meanwhile-")
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(f.url+"/#events")))
	waitJS(t, ctx, 10*time.Second, "the events of the time away", fmt.Sprintf(`window.mcpvisorDashboard.cursor() >= %d`, second))
	var seqs []uint64
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`window.mcpvisorDashboard.log().filter((e) => e.type !== "gap").map((e) => e.seq)`, &seqs)))
	require.NotEmpty(t, seqs)
	for i := 1; i < len(seqs); i++ {
		require.Equal(t, seqs[i-1]+1, seqs[i], "the log after the reload: no event lost or doubled")
	}
	assert.LessOrEqual(t, seqs[0], first-19, "the events from before the reload are kept")
	var gaps int
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`window.mcpvisorDashboard.log().filter((e) => e.type === "gap").length`, &gaps)))
	assert.Zero(t, gaps)

	// Filter by type and server.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SetValue(`#event-type`, "channel_message", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("event-type").dispatchEvent(new Event("change"))`, nil)))
	waitJS(t, ctx, 5*time.Second, "only channel messages listed",
		`[...document.querySelectorAll("#events tr")].length > 0 && [...document.querySelectorAll("#events tr")].every((tr) => tr.dataset.type === "channel_message")`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SetValue(`#event-type`, "", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("event-type").dispatchEvent(new Event("change"))`, nil),
		chromedp.SendKeys(`#event-server`, "api-0", chromedp.ByQuery)))
	waitJS(t, ctx, 5*time.Second, "only api-0x events listed",
		`[...document.querySelectorAll("#events tr")].length > 0 && [...document.querySelectorAll("#events tr")].every((tr) => tr.children[3].textContent.startsWith("api-0"))`)
	errs.check(t)
}

// At 1,280 px wide the servers table fits without sideways scrolling,
// its actions column in sight; every column name explains itself on hover
// (a title); and each tab opens from its own #hash (#tools the tools tab).
func TestDashboardFitsAndExplains(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	ctx := browser(t)
	errs := watchErrors(ctx)
	require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(1280, 900)))
	openDashboard(t, ctx, f.url)
	waitJS(t, ctx, 15*time.Second, "api-01 ready", rowState("api-01")+` === "ready"`)

	var fit struct {
		MainScroll, MainClient, DocScroll, DocClient int
		ActionsLeft, ActionsRight, ViewWidth         float64
		Untitled                                     []string
	}
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`(() => {
		const main = document.querySelector("main"), doc = document.documentElement;
		const cell = document.querySelector('#servers tr[data-server="api-01"] td.actions');
		const r = cell.getBoundingClientRect();
		const button = cell.querySelector("button").getBoundingClientRect();
		return {MainScroll: main.scrollWidth, MainClient: main.clientWidth, DocScroll: doc.scrollWidth, DocClient: doc.clientWidth,
			ActionsLeft: r.left, ActionsRight: Math.max(r.right, button.right), ViewWidth: doc.clientWidth,
			Untitled: [...document.querySelectorAll("table.servers th")].filter((th) => !th.title).map((th) => th.textContent)};
	})()`, &fit)))
	assert.LessOrEqual(t, fit.MainScroll, fit.MainClient, "the servers tab scrolls sideways at 1,280 px")
	assert.LessOrEqual(t, fit.DocScroll, fit.DocClient, "the page scrolls sideways at 1,280 px")
	assert.GreaterOrEqual(t, fit.ActionsLeft, 0.0)
	assert.LessOrEqual(t, fit.ActionsRight, fit.ViewWidth, "the actions column is out of sight")
	assert.Empty(t, fit.Untitled, "column names without an explanation")

	var eraTitle, strikesTitle string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Evaluate(`[...document.querySelectorAll("table.servers th")].find((th) => th.textContent === "Era").title`, &eraTitle),
		chromedp.Evaluate(`[...document.querySelectorAll("table.servers th")].find((th) => th.textContent === "Strikes").title`, &strikesTitle)))
	assert.Contains(t, eraTitle, "protocol version")
	assert.Contains(t, strikesTitle, "transient transport errors")

	for hash, section := range map[string]string{"#tools": "tab-tools", "#pool": "tab-tools", "#events": "tab-events", "#channels": "tab-channels", "#servers": "tab-servers"} {
		require.NoError(t, chromedp.Run(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(f.url+"/"+hash)))
		waitJS(t, ctx, 10*time.Second, hash+" shows "+section, `(() => {
			const shown = [...document.querySelectorAll("section.tab")].filter((s) => !s.hidden).map((s) => s.id);
			return shown.length === 1 && shown[0] === `+jsString(section)+`;
		})()`)
	}
	// A link to another tab's hash switches tabs on the page.
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`location.hash = "#tools"`, nil)))
	waitJS(t, ctx, 10*time.Second, "the tools tab after a hash change", `!document.getElementById("tab-tools").hidden && document.querySelector('.tabs button[data-tab="tools"]').getAttribute("aria-selected") === "true"`)
	errs.check(t)
}
