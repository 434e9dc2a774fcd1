package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// The admin API shows a failed server's error without the secrets of its
// config: /status and /events name its URL without user info or query,
// and the error page it answered with is quoted scrubbed.
func TestGatewayAdminShowsNoSecret(t *testing.T) {
	const query, user, pass, header = "gwQUERY-5d1e0a", "gwUSER-8c2b7f", "gwPASS-0e6d93", "gwHEADER-3a7c51"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := l.Addr().String()
	require.NoError(t, l.Close())
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("failed %s %s", r.URL.RequestURI(), r.Header.Get("Authorization")), http.StatusInternalServerError)
	}))
	t.Cleanup(echo.Close)
	park := mcpvisor.ReconnectPolicy{MaxAttempts: -1}
	url := func(hostport string) string {
		return "http://" + user + ":" + pass + "@" + hostport + "/mcp?api_key=" + query
	}
	headers := map[string]string{"Authorization": "Bearer " + header}
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"refused": {Config: transports.Config{Type: "http", URL: url(refused), Headers: headers}, Reconnect: park},
		"echoes":  {Config: transports.Config{Type: "http", URL: url(strings.TrimPrefix(echo.URL, "http://")), Headers: headers}, Reconnect: park},
	})
	_, srv := serve(t, sup, gateway.Options{})

	resp, err := client.Get(srv.URL + "/status")
	require.NoError(t, err)
	status, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	var rep gateway.StatusReport
	require.NoError(t, json.Unmarshal(status, &rep))
	require.Len(t, rep.Servers, 2)
	for _, st := range rep.Servers {
		assert.Equal(t, mcpvisor.StateFailed, st.State, st.Name)
	}
	assert.Contains(t, string(status), "connection refused")
	assert.Contains(t, string(status), "failed /mcp?api_key=[redacted] [redacted]")

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/events", nil)
	req.Header.Set("Last-Event-ID", "0")
	resp, err = streamClient.Do(req)
	require.NoError(t, err)
	events := testwait.NewLineReader(t, resp.Body)
	defer events.Close()
	var seen []string
	for failed := 0; failed < 2; {
		ev := events.Event("the failed states on /events")
		seen = append(seen, ev.Data)
		if strings.Contains(ev.Data, `"state":"failed"`) {
			failed++
		}
	}
	all := string(status) + "\n" + strings.Join(seen, "\n")
	for _, secret := range []string{query, user, pass, header} {
		assert.NotContains(t, all, secret)
	}
}
