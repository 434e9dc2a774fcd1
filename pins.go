package mcpvisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"slices"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/trust"
)

// PinOptions configure tool pinning (Options.ToolPins). The zero value
// pins nothing.
type PinOptions struct {
	// Store keeps the pins. Nil turns pinning off: every tool a server
	// lists is offered, as before pinning existed.
	Store PinStore

	// Trusted is the action for the tools of servers marked
	// trust: "trusted" (the user vouches for the server): empty means
	// PinOffer. Untrusted is the action for every other server: empty
	// means PinWithhold.
	Trusted, Untrusted PinAction
}

// PinStore keeps tool pins: what each tool's definition was when the user
// started relying on it. *trust.Store implements it (see
// trust.Store.CheckTools for the contract).
//
// Concurrency: CheckTools is called from many servers' goroutines at
// once.
type PinStore interface {
	// CheckTools compares the tools server (running identity) lists with
	// their pins, pins them when the server is new, records the changes
	// for review, and returns one check per tool, in order.
	CheckTools(ctx context.Context, server, identity string, tools []protocol.Tool) ([]trust.ToolCheck, error)
}

// PinAction is what becomes of a tool whose definition is not pinned (it
// changed since it was pinned, or it is new on a server seen before).
type PinAction string

// The pin actions.
const (
	// PinWithhold keeps the tool out of the pool (it is not listed and a
	// call to it is ErrUnknownTool) until the user approves its
	// definition.
	PinWithhold PinAction = "withhold"
	// PinOffer offers the tool all the same; the event and the pending
	// review say what changed.
	PinOffer PinAction = "offer"
)

// action returns what becomes of an unpinned tool of a server whose trust
// level is trustLevel. The levels beyond "trusted" (a later "untrusted" or
// "sandbox") take the Untrusted action.
func (o *PinOptions) action(trustLevel string) PinAction {
	if trustLevel == "trusted" {
		if o.Trusted != "" {
			return o.Trusted
		}
		return PinOffer
	}
	if o.Untrusted != "" {
		return o.Untrusted
	}
	return PinWithhold
}

// pinCheckTimeout bounds one pin check (a local file under a lock).
const pinCheckTimeout = 10 * time.Second

// toolPins is the verdict of a pin check on one tool list: the tools whose
// definition is not pinned. Immutable once made; nil means every tool is
// pinned (or pinning is off).
type toolPins struct {
	unpinned map[string]trust.ToolCheck // by the server's tool name
}

// unpinnedCheck returns the verdict on tool name, if it is not pinned.
func (p *toolPins) unpinnedCheck(name string) (trust.ToolCheck, bool) {
	if p == nil {
		return trust.ToolCheck{}, false
	}
	c, ok := p.unpinned[name]
	return c, ok
}

// pinIdentity identifies what runs under a server's name, for its pins: a
// hash of the transport type with the command and arguments, or the URL.
// A hash, so that secrets in an argument or URL are not written down.
func pinIdentity(cfg ServerConfig) string {
	h := sha256.New()
	h.Write([]byte(cfg.Kind()))
	for _, s := range append([]string{cfg.Command}, cfg.Args...) {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	h.Write([]byte{0})
	h.Write([]byte(cfg.URL))
	return hex.EncodeToString(h.Sum(nil))
}

// checkPins checks tools against the store (nil: pinning off). It runs in
// one of the server actor's goroutines. When the store fails, every tool
// counts as unpinned (new): what cannot be verified is not vouched for.
func checkPins(store PinStore, server string, cfg ServerConfig, tools []protocol.Tool) (*toolPins, error) {
	if store == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pinCheckTimeout)
	defer cancel()
	checks, err := store.CheckTools(ctx, server, pinIdentity(cfg), tools)
	if err != nil {
		checks = make([]trust.ToolCheck, len(tools))
		for i, t := range tools {
			checks[i] = trust.ToolCheck{Tool: t.Name, Status: trust.StatusNew, Hash: trust.ToolHash(t)}
		}
	}
	var p *toolPins
	for _, c := range checks {
		if !c.Status.Unpinned() {
			continue
		}
		if p == nil {
			p = &toolPins{unpinned: map[string]trust.ToolCheck{}}
		}
		p.unpinned[c.Tool] = c
	}
	return p, err
}

// reportPins returns the events for the tools of pins not yet reported by
// this actor (reported maps a tool to the hash it was reported with), and
// updates reported: a tool back to pinned is forgotten, so that a later
// change is reported again.
func reportPins(server string, pins *toolPins, trustLevel string, o *PinOptions, reported map[string]string) []eventRecord {
	for name, hash := range reported {
		if c, ok := pins.unpinnedCheck(name); !ok || c.Hash != hash {
			delete(reported, name)
		}
	}
	if pins == nil {
		return nil
	}
	var evs []eventRecord
	for _, name := range sortedKeysOf(pins.unpinned) {
		c := pins.unpinned[name]
		if reported[name] == c.Hash {
			continue
		}
		reported[name] = c.Hash
		evs = append(evs, eventRecord{Type: EventToolDefinitionChanged, ToolChange: &ToolChange{
			Tool: name, Name: QualifiedName(server, name), Change: string(c.Status),
			Action: o.action(trustLevel), Diff: c.Diff, Hash: c.Hash,
		}})
	}
	return evs
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// withheld reports whether the pool keeps tool name of the view out: its
// definition is not pinned and the server's action is PinWithhold.
func (v *serverView) withheld(name string) bool {
	_, unpinned := v.lists.pins.unpinnedCheck(name)
	return unpinned && v.pinOpts != nil && v.pinOpts.action(v.cfg.Trust) == PinWithhold
}

// withheldTools lists the tools of the view the pool keeps out, sorted.
func (v *serverView) withheldTools() []string {
	if v.lists.pins == nil {
		return nil
	}
	var out []string
	for _, name := range sortedKeysOf(v.lists.pins.unpinned) {
		if v.withheld(name) {
			out = append(out, name)
		}
	}
	return out
}

// pinReporter has one job: telling the host about the server's tools
// whose definitions are not pinned (Options.ToolPins), each definition
// once, and checking the tools again when asked (RecheckToolPins).
//
// Concurrency: owned by the server actor's goroutine, like the actor it
// is part of (a); a recheck runs in a goroutine that only sends its
// result.
type pinReporter struct {
	a *serverActor // the actor whose tools it checks

	// reported maps each unpinned tool already reported by an
	// EventToolDefinitionChanged to the hash reported (see reportPins).
	reported map[string]string
}

// found reports the unpinned tools of the server's current lists that
// were not reported yet, and logs a failure of the pin store. Callers
// report before they publish the view with the new lists: the registry
// then publishes a tool's tool_definition_changed before the tools_changed
// diff that withholds it, whether or not its pool rebuild is queued.
func (p *pinReporter) found(storeErr error) {
	a := p.a
	if storeErr != nil {
		a.log.Error().Err(storeErr).Msg("tool pins cannot be checked; every tool of the server counts as unpinned")
	}
	if a.opts.ToolPins.Store == nil || a.parent == nil {
		return
	}
	if p.reported == nil {
		p.reported = map[string]string{}
	}
	for _, ev := range reportPins(a.h.name, a.lists.pins, a.cfg.Trust, &a.opts.ToolPins, p.reported) {
		c := ev.ToolChange
		a.log.Warn().Str("tool", c.Tool).Str("change", c.Change).Str("action", string(c.Action)).Str("diff", c.Diff).
			Msg("tool definition not pinned")
		a.root.Send(a.parent, serverEvent{handle: a.h, event: ev})
	}
}

// recheck checks the server's current tools against the pins again,
// in a goroutine; the result comes back as pinsChecked.
func (p *pinReporter) recheck() {
	a := p.a
	store := a.opts.ToolPins.Store
	if store == nil || a.sess == nil || a.stopping {
		return
	}
	gen, tools, self, root, name, cfg := a.gen, a.lists.tools, a.self, a.root, a.h.name, a.cfg
	a.goroutines.start("server.pin-check", func() {
		pins, err := checkPins(store, name, cfg, tools)
		root.Send(self, pinsChecked{gen: gen, tools: tools, pins: pins, err: err})
	})
}

// pinsChecked installs a recheck's result, if the list it checked is
// still the server's.
func (p *pinReporter) checked(m pinsChecked) {
	a := p.a
	if m.gen != a.gen || a.sess == nil || !sameSlice(m.tools, a.lists.tools) {
		return // a newer list was checked with its listing
	}
	changed := !reflect.DeepEqual(a.lists.pins, m.pins)
	a.lists.pins = m.pins
	p.found(m.err)
	if changed {
		a.publish()
	}
}

// RecheckToolPins has every connected server check its tools against the
// pins again (Options.ToolPins), after the user approved definitions: a
// tool now pinned joins the pool, and a tools_changed event says so. It
// returns at once; the rechecks run in the background.
func (s *Supervisor) RecheckToolPins(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	if s.opts.ToolPins.Store == nil {
		return nil
	}
	for _, h := range *s.handles.Load() {
		s.system.Root.Send(h.pid, recheckPins{})
	}
	return nil
}
