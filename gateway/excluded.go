package gateway

import (
	"maps"
	"slices"
)

// ExcludedReport is a server of the configuration that a managed policy
// keeps from running (config.Config.Excluded), with the policy's
// reason, as GET /status lists it. The supervisor never had it.
type ExcludedReport struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// SetExcluded replaces the excluded servers that GET /status lists: the
// configuration's Excluded map, name to reason (nil: none). The caller
// sets it again after each reload. It may be called from any goroutine.
func (g *Gateway) SetExcluded(excluded map[string]string) {
	list := make([]ExcludedReport, 0, len(excluded))
	for _, name := range slices.Sorted(maps.Keys(excluded)) {
		list = append(list, ExcludedReport{Name: name, Reason: excluded[name]})
	}
	g.mu.Lock()
	g.excluded = list
	g.mu.Unlock()
}
