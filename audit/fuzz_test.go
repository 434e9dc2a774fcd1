package audit_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpvisor/mcpvisor/audit"
)

// FuzzDecodeLine: any input either decodes to a line that satisfies
// DecodeLine's promises, or fails with ErrMalformed; it never panics.
func FuzzDecodeLine(f *testing.F) {
	f.Add([]byte(`{"seq":1,"prev":"` + audit.Genesis + `","time":"2026-01-02T03:04:05.123456789Z","action":"tools/call","outcome":"ok","duration_ns":5}`))
	f.Add([]byte(`{"seq":2,"prev":"` + audit.Genesis + `","time":"2026-01-02T03:04:05Z","action":"refused","outcome":"refused","request_id":"x","arguments":{"a":[1,2]}}`))
	f.Add([]byte(`{"seq":0}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Add([]byte("{\"seq\":1e400}\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := audit.DecodeLine(b)
		if err != nil {
			if l.Seq != 0 || l.Prev != "" {
				t.Fatalf("a failed decode returned a line: %+v", l)
			}
			return
		}
		if l.Seq == 0 || len(l.Prev) != 64 || l.Action == "" || l.Outcome == "" {
			t.Fatalf("decoded a line that breaks the promises: %+v", l)
		}
		if l.RequestID != nil && !json.Valid(l.RequestID) {
			t.Fatalf("request id is not JSON: %q", l.RequestID)
		}
	})
}
