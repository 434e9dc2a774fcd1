package gateway

import (
	"strings"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/config"
)

// SkippedReport is a config layer file the loader left out because it
// does not load (config.Config.Skipped), as GET /status shows it.
type SkippedReport struct {
	// Layer is the file's layer (user, project, local, or a host's own).
	Layer string `json:"layer"`
	// File is the file as named to the loader.
	File string `json:"file"`
	// Errors are its problems, each without the file name.
	Errors []string `json:"errors"`
}

// skippedLayers holds the latest load's skipped layers for the status.
//
// Concurrency: set by SetSkipped (the supervise loop, at each load) and
// read by any status request; the slice is never modified once stored.
type skippedLayers struct {
	p atomic.Pointer[[]SkippedReport]
}

// SetSkipped records the config layers the latest load of the
// configuration skipped; GET /status lists them until the next call.
// Safe for concurrent use.
func (g *Gateway) SetSkipped(skipped []config.SkippedLayer) {
	out := make([]SkippedReport, len(skipped))
	for i, sk := range skipped {
		out[i] = SkippedReport{Layer: sk.Layer, File: sk.File, Errors: make([]string, len(sk.Errors))}
		for j, e := range sk.Errors {
			out[i].Errors[j] = strings.TrimPrefix(e.Error(), sk.File+": ")
		}
	}
	g.skipped.p.Store(&out)
}

// reports returns what SetSkipped recorded (nil if nothing).
func (sl *skippedLayers) reports() []SkippedReport {
	if p := sl.p.Load(); p != nil && len(*p) > 0 {
		return *p
	}
	return nil
}
