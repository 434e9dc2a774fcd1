package main

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --session-keys: a good file gives the keys in order with their grace
// periods and the max age; a bad one is an errSessionKeys that names the
// file and never quotes a key.
func TestLoadSessionSeal(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		path := filepath.Join(dir, "keys.json")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	k1 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	k2 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("o", 32)))
	o, err := loadSessionSeal(write(`{"keys":[{"secret":"`+k1+`"},{"secret":"`+k2+`","acceptUntil":"2026-12-01T00:00:00Z"}],"maxAge":"12h"}`), nil)
	require.NoError(t, err)
	require.Len(t, o.Keys, 2)
	assert.Equal(t, strings.Repeat("k", 32), string(o.Keys[0].Secret))
	assert.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), o.Keys[1].AcceptUntil)
	assert.Equal(t, 12*time.Hour, o.MaxAge)

	short := base64.StdEncoding.EncodeToString([]byte("too short a secret"))
	for name, content := range map[string]string{
		"not JSON":   `keys: ` + k1,
		"no keys":    `{"keys":[]}`,
		"short key":  `{"keys":[{"secret":"` + short + `"}]}`,
		"not base64": `{"keys":[{"secret":"` + k1 + `!!"}]}`,
		"bad maxAge": `{"keys":[{"secret":"` + k1 + `"}],"maxAge":"soon"}`,
	} {
		_, err := loadSessionSeal(write(content), nil)
		require.Error(t, err, name)
		assert.True(t, errors.Is(err, errSessionKeys), "%s: %v", name, err)
		assert.NotContains(t, err.Error(), k1, "%s: the error quotes a key", name)
		assert.NotContains(t, err.Error(), short, "%s: the error quotes a key", name)
	}
	_, err = loadSessionSeal(filepath.Join(dir, "absent.json"), nil)
	assert.True(t, errors.Is(err, errSessionKeys))
}
