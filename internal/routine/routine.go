// Package routine starts mcpvisor's long-lived goroutines under a name.
// The name is a pprof label ("mcpvisor"), so a goroutine profile taken
// with debug=1 (net/http/pprof's /debug/pprof/goroutine?debug=1, or
// pprof.Lookup("goroutine").WriteTo(w, 1)) says what each goroutine is
// ("stdio.read", "server.connect" …) and which server it serves.
//
// Names are "<package or role>.<job>"; the optional key/value pairs
// (for example "server", name) add labels.
package routine

import (
	"context"
	"runtime/pprof"
	"sync"
)

// Label is the pprof label key that carries a goroutine's name.
const Label = "mcpvisor"

// named caches the label context of each name without extra labels, so
// that starting a named goroutine allocates nothing for its labels.
var named sync.Map // name → context.Context

func labels(name string, kv []string) context.Context {
	if len(kv) == 0 {
		if ctx, ok := named.Load(name); ok {
			return ctx.(context.Context)
		}
		ctx := pprof.WithLabels(context.Background(), pprof.Labels(Label, name))
		named.Store(name, ctx)
		return ctx
	}
	return pprof.WithLabels(context.Background(), pprof.Labels(append([]string{Label, name}, kv...)...))
}

// Go starts f in a new goroutine named name (with the labels kv, pairs of
// key and value).
func Go(name string, f func(), kv ...string) {
	ctx := labels(name, kv)
	go func() {
		pprof.SetGoroutineLabels(ctx)
		f()
	}()
}

// Run runs f in the calling goroutine with the labels name and kv, and
// clears the labels when f returns. It is for goroutines started by
// someone else (a worker pool, whose workers carry no labels of their
// own) that take on a named job for a while; Runs do not nest (an inner
// Run's end clears the outer one's labels).
func Run(name string, f func(), kv ...string) {
	pprof.SetGoroutineLabels(labels(name, kv))
	defer pprof.SetGoroutineLabels(context.Background())
	f()
}
