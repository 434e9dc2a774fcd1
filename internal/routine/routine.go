// Package routine starts mcpvisor's long-lived goroutines under a name.
// The name is a pprof label ("mcpvisor"), so a goroutine profile taken
// with debug=1 (net/http/pprof's /debug/pprof/goroutine?debug=1, or
// pprof.Lookup("goroutine").WriteTo(w, 1)) says what each goroutine is
// ("stdio.read", "server.connect" …) and which server it serves, and
// every frame below it shows routine.Run: one place where they begin.
//
// Names are "<package or role>.<job>"; the optional key/value pairs
// (for example "server", name) add labels.
package routine

import (
	"context"
	"runtime/pprof"
)

// Label is the pprof label key that carries a goroutine's name.
const Label = "mcpvisor"

// Go starts f in a new goroutine named name (see Run).
func Go(name string, f func(), kv ...string) {
	go Run(name, f, kv...)
}

// Run runs f in the calling goroutine with the labels name and kv (pairs
// of key and value), and clears the labels when f returns. It is for
// goroutines started by someone else (a worker pool, whose workers carry
// no labels of their own) that take on a named job for a while; Runs do
// not nest (an inner Run's end clears the outer one's labels).
func Run(name string, f func(), kv ...string) {
	pprof.Do(context.Background(), pprof.Labels(append([]string{Label, name}, kv...)...), func(context.Context) { f() })
}
