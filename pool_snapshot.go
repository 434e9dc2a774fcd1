package mcpvisor

// pool is an immutable snapshot of everything offered to the host: the
// host's built-ins and what the servers offer, built by the registry and
// read by callers without a mailbox hop.
type pool struct {
	builtins      []Tool // the host's built-ins, sorted by name
	builtinByName map[string]*BuiltinTool
	tools         []*Tool // MCP tools, sorted by qualified name; shared with the offers (and other pools): read-only
	toolsByName   pmap[string, poolEntry]
	prompts       []Prompt // sorted by qualified name
	promptsByName pmap[string, poolEntry]
	resources     []Resource         // sorted by server, then URI
	templates     []ResourceTemplate // sorted by server, then URI template
	// hiddenTools routes the qualified names of the tools a server not
	// offering them (parked, or trying to connect again after it was
	// parked) listed when last connected: not in the pool, but a call by
	// name wakes the server or waits for it.
	hiddenTools pmap[string, poolEntry]
	// off holds the servers the host toggled off; offRoutes maps the
	// qualified names of their tools and prompts to them, so that a call
	// to one is refused with ErrServerOff rather than reported unknown.
	off       pmap[string, bool]
	offRoutes pmap[string, string]
	// collisions are the renames this pool made, in the order made.
	collisions []Collision
	// renamed remembers the names collisions gave (kind, server,
	// original → name), also for servers no longer offering them, so that
	// a parked or toggled-off server's tools are still routed, or refused,
	// under the name the model knows.
	renamed map[renameKey]string
	// offered counts each server's tools in the pool.
	offered pmap[string, int]
	// views are the server views the pool was built from, each with the
	// offer it made (nil unless it offered its lists). Offers live here,
	// in the immutable pool, not on the views: the next pool reuses an
	// offer whose view's lists and settings did not change.
	views pmap[*serverHandle, pooledView]
	// parts are the servers the pool was built from, for nextPool to tell
	// which changed; builtinsFrom and maxDescription the rest of its input.
	parts          pmap[*serverHandle, poolServer]
	built          bool // made by nextPool (false: emptyPool)
	builtinsFrom   []BuiltinTool
	maxDescription int
	// contested is set when two servers routed the same hidden or
	// toggled-off name (the later one won), which only a whole build
	// reproduces.
	contested bool
}

type renameKey struct{ kind, server, original string }

// knownName is the name server's entry original was last offered under.
func (p *pool) knownName(kind, server, original string) string {
	if name, ok := p.renamed[renameKey{kind, server, original}]; ok {
		return name
	}
	return QualifiedName(server, original)
}

// poolEntry routes a qualified name to its server and the server's own
// name for the tool or prompt.
type poolEntry struct {
	h    *serverHandle
	name string
	// replayable: the server is trusted and the tool's annotations say
	// read-only and idempotent, so a call lost with its connection may be
	// sent again (Options.ReplayIdempotent).
	replayable bool
}

var emptyPool = &pool{builtinByName: map[string]*BuiltinTool{}}

// viewOf is the view of h the pool was built from, with its offer (zero
// when h is not in the pool).
func (p *pool) viewOf(h *serverHandle) pooledView {
	pv, _ := p.views.Get(h)
	return pv
}
