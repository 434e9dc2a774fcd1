package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Genesis is the prev of the first line of a trail: 64 zeros, the hash
// of nothing before it.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Actions: what a line records.
const (
	ActionToolsCall     = "tools/call"
	ActionResourcesRead = "resources/read"
	ActionPromptsGet    = "prompts/get"
	// ActionApproval: a client's (or the dashboard's) answer to a call
	// that needed approval.
	ActionApproval = "approval"
	// ActionAdmin: a state-changing admin request (reconnect, toggle,
	// reload, a permission answer, a login); Op says which.
	ActionAdmin = "admin"
	// ActionRefused: a request refused before any handler (401 or 403:
	// a missing or wrong token, a foreign Host or Origin).
	ActionRefused = "refused"
)

// Outcomes of a line.
const (
	OutcomeOK = "ok"
	// OutcomeError: the request failed; Code is the JSON-RPC error code
	// (or HTTPStatus the HTTP status of an admin request).
	OutcomeError = "error"
	// OutcomeToolError: a tools/call answered with isError true.
	OutcomeToolError = "tool_error"
	// OutcomeRefused: the request was refused (a permission rule, a
	// denied tool, a declined approval, a missing token); Reason says why.
	OutcomeRefused = "refused"
	// OutcomeCancelled: the client cancelled the request.
	OutcomeCancelled = "cancelled"
)

// Line is one line of a trail, as written and as decoded. The JSON
// field order is the struct's; the line's hash is over its bytes as
// written (without the newline), so a reader that re-encodes a Line does
// not reproduce it: verify the bytes (Verify).
type Line struct {
	// Seq numbers the lines of a trail from 1, across rotated files.
	Seq uint64 `json:"seq"`
	// Prev is the hex SHA-256 of the previous line's bytes (Genesis for
	// the first line of a trail).
	Prev string `json:"prev"`
	// Time is when the action began, RFC 3339 with nanoseconds, UTC.
	Time string `json:"time"`
	// Member is the cluster member that wrote the line (Options.Member).
	Member string `json:"member,omitempty"`
	Action string `json:"action"`
	// Subject and ClientID name the caller (gateway.Identity); both
	// empty for an anonymous caller or the static token.
	Subject  string `json:"subject,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// Session is the session tag: a keyed hash of the session id (never
	// the id itself), the same for every line of one session written
	// with one key.
	Session string `json:"session,omitempty"`
	Server  string `json:"server,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Prompt  string `json:"prompt,omitempty"`
	URI     string `json:"uri,omitempty"`
	// Op is what an admin request did (reconnect, toggle, reload, …) or
	// what a refused request asked for (its method and path).
	Op      string `json:"op,omitempty"`
	Outcome string `json:"outcome"`
	// Code is the JSON-RPC error code of an error or refusal.
	Code int64 `json:"code,omitempty"`
	// Reason says why a request failed or was refused (cut at 300 bytes).
	Reason string `json:"reason,omitempty"`
	// HTTPStatus is the status of an admin or refused HTTP request.
	HTTPStatus int `json:"http_status,omitempty"`
	// DurationNs is how long the action took, in nanoseconds.
	DurationNs int64 `json:"duration_ns"`
	// RequestID is the JSON-RPC id of the request, as the client sent it.
	RequestID json.RawMessage `json:"request_id,omitempty"`
	// TraceID is the OpenTelemetry trace id of the request, when it
	// carried or started one.
	TraceID string `json:"trace_id,omitempty"`
	// Dropped counts the entries dropped since the previous line because
	// the writer's queue was full.
	Dropped uint64 `json:"dropped,omitempty"`
	// Arguments and Result are written only when the Writer is told to
	// (Options.Arguments, Options.Results), redacted (Redact).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// ErrMalformed is wrapped by DecodeLine's error: the bytes are not a
// trail line.
var ErrMalformed = errors.New("audit: not a trail line")

// MaxLineSize bounds a line DecodeLine accepts, and so what Verify reads
// as one line.
const MaxLineSize = 4 << 20

// DecodeLine decodes one line of a trail (without its newline): a JSON
// object with seq ≥ 1, prev a hex SHA-256, a time in RFC 3339, an
// action and an outcome. Any other input returns an error wrapping
// ErrMalformed.
func DecodeLine(b []byte) (Line, error) {
	var l Line
	if len(b) > MaxLineSize {
		return l, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLineSize)
	}
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 || b[0] != '{' {
		return l, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return Line{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case l.Seq == 0:
		return Line{}, fmt.Errorf("%w: no seq", ErrMalformed)
	case !isHash(l.Prev):
		return Line{}, fmt.Errorf("%w: prev is not a hex SHA-256", ErrMalformed)
	case l.Action == "" || l.Outcome == "":
		return Line{}, fmt.Errorf("%w: no action or outcome", ErrMalformed)
	}
	if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil {
		return Line{}, fmt.Errorf("%w: time %q is not RFC 3339", ErrMalformed, l.Time)
	}
	return l, nil
}

// isHash reports whether s is 64 lower-case hex digits.
func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// lineHash is the hex SHA-256 of a line's bytes (without its newline).
func lineHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
