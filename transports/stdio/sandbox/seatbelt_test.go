package sandbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The Seatbelt profile (macOS, built here but not run): SBPL takes the
// last matching rule, so the denials come after the blanket allow and the
// server's own paths after the denials; strings are quoted.
func TestSeatbeltProfile(t *testing.T) {
	p := SeatbeltProfile("/Users/ada", []string{"/Users/ada/work data"}, []string{`/Users/ada/out"q`}, "/tmp/mcpvisor-x", false)
	order := []string{
		"(version 1)",
		"(allow default)",
		`(deny file-read* (subpath "/Users/ada"))`,
		"(deny file-write*)",
		`(literal "/dev/null")`,
		"(deny network*)",
		`(allow file-read* (subpath "/Users/ada/work data"))`,
		`(allow file-read* file-write* (subpath "/Users/ada/out\"q") (subpath "/tmp/mcpvisor-x"))`,
	}
	at := 0
	for _, want := range order {
		i := strings.Index(p[at:], want)
		if !assert.GreaterOrEqual(t, i, 0, "%q missing, or out of order, in:\n%s", want, p) {
			return
		}
		at += i + len(want)
	}
	// With network, no network rule at all.
	assert.NotContains(t, SeatbeltProfile("/Users/ada", nil, nil, "", true), "network")
	// The parentheses balance.
	assert.Equal(t, strings.Count(p, "("), strings.Count(p, ")"))
}
