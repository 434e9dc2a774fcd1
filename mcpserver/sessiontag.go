package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
)

// sessionTag names a session in logs without its id: whoever holds an
// Mcp-Session-Id can act in that session (a sealed id also carries what
// the session needs), so logs show the first 8 bytes of its SHA-256,
// enough to follow one session through a log and useless to replay.
func sessionTag(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}
