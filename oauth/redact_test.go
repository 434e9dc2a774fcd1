package oauth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server URL's user info and query (an api_key) stay out of the
// discovery's errors: an unusable URL, and metadata for another resource.
func TestDiscoveryErrorsHideTheServerURLsSecrets(t *testing.T) {
	for _, raw := range []string{"http://a b/mcp?api_key=k3y", "/mcp?api_key=k3y"} {
		_, err := CanonicalResource(raw)
		require.Error(t, err, raw)
		assert.NotContains(t, err.Error(), "k3y", raw)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": "https://other.example.com/mcp?api_key=k3y",
			"authorization_servers": []string{"https://as.example.com"}})
	}))
	t.Cleanup(srv.Close)
	u := "http://us3r:pa55@" + srv.Listener.Addr().String() + "/mcp?api_key=k3y"
	_, err := DiscoverResource(ctx(t), srv.Client(), u, "")
	require.ErrorIs(t, err, ErrResourceMismatch)
	for _, secret := range []string{"us3r", "pa55", "k3y"} {
		assert.NotContains(t, err.Error(), secret)
	}
}
