package mcpserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A session is named in logs by a tag that is stable for one id, differs
// between ids, and does not contain the id.
func TestSessionTagHidesTheID(t *testing.T) {
	id := "d5c3a1f0-6b7e-4c2a-9f1d-0e8b7a6c5d4e"
	assert.Equal(t, sessionTag(id), sessionTag(id))
	assert.NotEqual(t, sessionTag(id), sessionTag(id+"x"))
	assert.NotContains(t, sessionTag(id), id[:8])
	assert.Len(t, sessionTag(id), 16)
}
