package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
)

// do sends one request to the gateway and returns the status and body.
func do(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// The mutating endpoints take POST only, JSON only, from the page's own
// origin only, and say why they refuse.
func TestDashboardActionsGuarded(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	jsonCT := map[string]string{"Content-Type": "application/json"}
	toggle := f.url + "/admin/servers/api-01/toggle"

	code, _ := do(t, http.MethodGet, toggle, "", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, code, "GET")
	code, _ = do(t, http.MethodPost, toggle, `{"on":false}`, map[string]string{"Content-Type": "text/plain"})
	assert.Equal(t, http.StatusUnsupportedMediaType, code, "a form's content type")
	code, _ = do(t, http.MethodPost, toggle, `{"on":false}`, map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:9"})
	assert.Equal(t, http.StatusForbidden, code, "another loopback origin")
	code, _ = do(t, http.MethodPost, toggle, `{"on":false}`, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, code, "a cross-site fetch")
	assert.False(t, f.status(t, "api-01").ToggledOff, "a refused request changed nothing")

	code, body := do(t, http.MethodPost, toggle, `{}`, jsonCT)
	assert.Equal(t, http.StatusBadRequest, code, body)
	code, body = do(t, http.MethodPost, toggle, `{"on":`, jsonCT)
	assert.Equal(t, http.StatusBadRequest, code, body)
	code, body = do(t, http.MethodPost, f.url+"/admin/servers/nope/toggle", `{"on":false}`, jsonCT)
	assert.Equal(t, http.StatusNotFound, code, body)
	code, body = do(t, http.MethodPost, f.url+"/admin/servers/"+fleetHeld+"/reconnect", "", nil)
	assert.Equal(t, http.StatusConflict, code, body)
	code, body = do(t, http.MethodPost, f.url+"/admin/permissions/zzzzz", `{"allow":true}`, jsonCT)
	assert.Equal(t, http.StatusNotFound, code, body)
	code, body = do(t, http.MethodPost, f.url+"/admin/reload", "", nil)
	assert.Equal(t, http.StatusNotImplemented, code, body)

	// From the page's own origin (or a script with no Origin) it acts.
	code, body = do(t, http.MethodPost, toggle, `{"on":false}`, map[string]string{"Content-Type": "application/json", "Origin": f.url, "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusOK, code, body)
	assert.True(t, f.status(t, "api-01").ToggledOff)
	code, body = do(t, http.MethodPost, toggle, `{"on":true}`, jsonCT)
	require.Equal(t, http.StatusOK, code, body)
	assert.False(t, f.status(t, "api-01").ToggledOff)

	// A login the authorization server cannot serve fails with its
	// reason (the mock servers have no authorization server).
	code, body = do(t, http.MethodPost, f.url+"/admin/servers/api-02/login", "", nil)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "oauth")
}

// GET /admin/pool shows each tool with its server, schema and
// annotations, the collision's rename and who holds the name, prompts,
// resources, and the withheld tools.
func TestDashboardPool(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	code, body := do(t, http.MethodGet, f.url+"/admin/pool", "", nil)
	require.Equal(t, http.StatusOK, code, body)
	var pool struct {
		Tools []struct {
			Name, Qualified, Server, RenamedFrom, Holder string
			Offered                                      bool
			Definition                                   struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
		}
		Prompts   []struct{ Name, Server string }
		Resources []struct{ Server string }
		Withheld  map[string][]string
	}
	require.NoError(t, json.Unmarshal([]byte(body), &pool))
	inPool := map[string]bool{}
	for _, tool := range f.sup.Tools() {
		inPool[tool.Name] = true
	}
	var missing []string
	for _, tool := range pool.Tools {
		if !inPool[tool.Qualified] {
			missing = append(missing, tool.Qualified)
		}
	}
	assert.Empty(t, missing, "tools listed that the pool does not hold")
	assert.Greater(t, len(pool.Tools), 200, "the pool's tools")
	var renamed int
	for _, tool := range pool.Tools {
		assert.True(t, tool.Offered)
		assert.NotEmpty(t, tool.Definition.InputSchema, tool.Name)
		if tool.RenamedFrom != "" {
			renamed++
			assert.Contains(t, []string{"team.api", "team_api"}, tool.Server)
			assert.Contains(t, tool.Holder, "team", "who holds %s", tool.RenamedFrom)
			assert.NotEqual(t, tool.RenamedFrom, tool.Qualified)
		}
	}
	assert.Positive(t, renamed, "the team.api/team_api collision")
	assert.NotEmpty(t, pool.Prompts)
	assert.NotEmpty(t, pool.Resources)
	assert.Equal(t, []string{"echo"}, pool.Withheld[fleetPinned])
}

// sseFrame is one frame of an event stream.
type sseFrame struct{ id, event, data string }

// readFrames reads frames from an event stream until keep says stop.
func readFrames(t *testing.T, url string, header map[string]string, within time.Duration, keep func(sseFrame) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var f sseFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.event != "" && !keep(f) {
				return
			}
			f = sseFrame{}
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = line[6:]
		}
	}
	t.Fatalf("the stream ended (or %v passed) before the test saw what it waited for: %v", within, sc.Err())
}

// The dashboard's stream starts with a snapshot of every row, resumes
// after a cursor with the events since (ids = sequence numbers), says
// when the cursor is older than what the gateway remembers (a gap), and
// sends a changed row soon after the change.
func TestDashboardStream(t *testing.T) {
	f := startFleet(t, fleetOptions{})
	from, err := f.sup.LastSeq(t.Context())
	require.NoError(t, err)
	_, err = f.sup.CallTool(t.Context(), mcpvisor.QualifiedName(fleetChannel, "channel_burst"), map[string]any{"n": 5, "prefix": "m"})
	require.NoError(t, err)
	last, err := f.sup.LastSeq(t.Context())
	require.NoError(t, err)

	var snapshot struct {
		Servers []struct{ Name, State string }
		History map[string][][2]uint64
		Actions map[string]bool
	}
	var got []uint64
	frames := 0
	readFrames(t, f.url+"/admin/stream?after="+strconv.FormatUint(from, 10), nil, 20*time.Second, func(fr sseFrame) bool {
		frames++
		switch fr.event {
		case "snapshot":
			require.Equal(t, 1, frames, "the snapshot comes first")
			require.NoError(t, json.Unmarshal([]byte(fr.data), &snapshot))
		case "events":
			var batch []mcpvisor.EventHeader
			require.NoError(t, json.Unmarshal([]byte(fr.data), &batch))
			for _, ev := range batch {
				got = append(got, ev.Seq)
			}
			assert.Equal(t, strconv.FormatUint(batch[len(batch)-1].Seq, 10), fr.id)
		}
		return len(got) == 0 || got[len(got)-1] < last
	})
	assert.Len(t, snapshot.Servers, fleetSize)
	assert.True(t, snapshot.Actions["reconnect"])
	assert.Equal(t, from+1, got[0], "resumed right after the cursor")
	for i := 1; i < len(got); i++ {
		assert.Equal(t, got[i-1]+1, got[i], "no event skipped")
	}

	// A cursor older than the 1,024 events the supervisor remembers
	// begins with a gap.
	_, err = f.sup.CallTool(t.Context(), mcpvisor.QualifiedName(fleetChannel, "channel_burst"), map[string]any{"n": 1100, "prefix": "m"})
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for {
		seq, err := f.sup.LastSeq(t.Context())
		require.NoError(t, err)
		if seq > last+1100 {
			break
		}
		require.True(t, time.Now().Before(deadline), "waited 20s for the burst's events; the last is %d", seq)
		time.Sleep(20 * time.Millisecond)
	}
	var gap mcpvisor.GapEvent
	readFrames(t, f.url+"/admin/stream?after=1", nil, 20*time.Second, func(fr sseFrame) bool {
		if fr.event != "events" {
			return true
		}
		var batch []mcpvisor.GapEvent
		require.NoError(t, json.Unmarshal([]byte(fr.data), &batch))
		gap = batch[0]
		return false
	})
	assert.Equal(t, mcpvisor.EventGap, gap.Type)
	assert.Equal(t, mcpvisor.GapCursorTooOld, gap.GapReason)
	assert.Positive(t, gap.Dropped)

	// A toggle shows as a status frame with that row.
	readFrames(t, f.url+"/admin/stream", nil, 20*time.Second, func(fr sseFrame) bool {
		switch fr.event {
		case "snapshot":
			require.NoError(t, f.sup.Server("api-07").Toggle(t.Context(), false))
		case "status":
			var st struct {
				Servers []struct {
					Name       string
					ToggledOff bool `json:"toggledOff"`
				}
			}
			require.NoError(t, json.Unmarshal([]byte(fr.data), &st))
			for _, s := range st.Servers {
				if s.Name == "api-07" && s.ToggledOff {
					return false
				}
			}
		}
		return true
	})
}
