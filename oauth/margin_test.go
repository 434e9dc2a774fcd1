package oauth

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With no RefreshMargin, a token is refreshed five minutes before it
// expires, or a fifth of its lifetime before when that is shorter: never
// earlier, never later (the injected clock stops one second short of the
// moment, then reaches it).
func TestDefaultRefreshMargin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn int           // seconds
		refreshAt time.Duration // after issue
	}{
		{"an hour: five minutes before", 3600, 55 * time.Minute},
		{"25 minutes: five minutes is a fifth", 1500, 20 * time.Minute},
		{"ten minutes: a fifth of the lifetime", 600, 8 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			set := func(at time.Time) { mu.Lock(); now = at; mu.Unlock() }
			issued := now
			f := newFakeAS(t, func(f *fakeAS) { f.expiresIn = tc.expiresIn })
			s := newSource(t, f, func(c *Config) { c.Now = clock })
			mustCall(t, s, f.mcpURL())
			require.Equal(t, issued.Add(time.Duration(tc.expiresIn)*time.Second), s.Status().Expiry)

			set(issued.Add(tc.refreshAt - time.Second))
			_, err := s.Token(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, 0, s.Status().Refreshes, "no refresh %v before the margin", time.Second)

			set(issued.Add(tc.refreshAt))
			_, err = s.Token(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, 1, s.Status().Refreshes, "refreshed %v after issue", tc.refreshAt)
		})
	}
	assert.Equal(t, 5*time.Minute, DefaultRefreshMargin)
}
