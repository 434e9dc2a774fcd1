package mcpvisor

// contribution is what one server puts in the pool: its view, its offer
// (nil unless it offers its lists), and the names it routes without
// offering them.
type contribution struct {
	view      *serverView
	offer     *offer
	off       bool
	hidden    []hiddenTool // tools routed while not offered
	offRoutes []offRoute   // names refused with ErrServerOff
}

// hiddenTool is a tool routed while not offered, under the name it was
// last offered under (entry.name is its own).
type hiddenTool struct {
	name  string
	entry poolEntry
}

// offRoute is a tool or prompt of a toggled-off server, under the name
// it was last offered under.
type offRoute struct {
	kind, original, name string
}

// contributionOf is what s, with view v, puts in the pool; prev is the
// pool before (its offer for the server, and the names of the entries it
// routes without offering).
func contributionOf(s poolServer, v *serverView, prev *pool, maxDescription int) contribution {
	c := routesOf(s, v, prev)
	if v != nil && !s.off && v.offersTools() {
		c.offer = offerOf(s.name, v, prev.viewOf(s.h), maxDescription)
	}
	return c
}

// usedBy is the contribution old made to prev: the offer prev used.
func usedBy(old poolServer, prev *pool) contribution {
	pv := prev.viewOf(old.h)
	c := routesOf(old, pv.view, prev)
	c.offer = pv.offer
	return c
}

// routesOf is what s, with view v, routes without offering it, under
// the names prev gave.
func routesOf(s poolServer, v *serverView, prev *pool) contribution {
	c := contribution{view: v, off: s.off}
	if v == nil {
		return c
	}
	if s.off {
		for _, t := range v.lists.tools {
			c.offRoutes = append(c.offRoutes, offRoute{"tool", t.Name, prev.knownName("tool", s.name, t.Name)})
		}
		for _, pr := range v.lists.prompts {
			c.offRoutes = append(c.offRoutes, offRoute{"prompt", pr.Name, prev.knownName("prompt", s.name, pr.Name)})
		}
		return c
	}
	if v.routesHiddenTools() {
		trusted := v.cfg.Trust == "trusted"
		for _, t := range v.lists.tools {
			if v.cfg.Tools.allowed(t.Name) && !v.withheld(t.Name) {
				c.hidden = append(c.hidden, hiddenTool{prev.knownName("tool", s.name, t.Name),
					poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)}})
			}
		}
	}
	return c
}
