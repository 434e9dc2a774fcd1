package main

import (
	"sync"
	"time"
)

// placement follows the members' own events: which member each server
// is ready on, which members hold an activation of it, and how often two
// members held one at once.
//
// Concurrency: add is called by the event reader goroutine; the other
// methods by the benchmark's goroutine; a mutex guards everything.
type placement struct {
	mu sync.Mutex
	// readyOn is the member a server was last ready on (absent: none).
	readyOn map[string]string
	// readyAt is when that ready event happened.
	readyAt map[string]time.Time
	// holders is the members with an activation of a server.
	holders map[string]map[string]bool
	// overlaps counts activations that began while another member held one.
	overlaps int
	// lastChange is the time of the last activated/released event seen.
	lastChange time.Time
	dead       map[string]bool
}

func newPlacement() *placement {
	return &placement{readyOn: map[string]string{}, readyAt: map[string]time.Time{},
		holders: map[string]map[string]bool{}, dead: map[string]bool{}}
}

func (p *placement) add(ev event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead[ev.Member] {
		return
	}
	switch ev.Type {
	case "activated":
		h := p.holders[ev.Server]
		if h == nil {
			h = map[string]bool{}
			p.holders[ev.Server] = h
		}
		if len(h) > 0 && !h[ev.Member] {
			p.overlaps++
		}
		h[ev.Member] = true
		p.lastChange = time.Now()
	case "ready":
		p.readyOn[ev.Server] = ev.Member
		p.readyAt[ev.Server] = ev.Time
	case "released":
		delete(p.holders[ev.Server], ev.Member)
		if p.readyOn[ev.Server] == ev.Member {
			delete(p.readyOn, ev.Server)
		}
		p.lastChange = time.Now()
	}
}

// died forgets every activation of member (killed with -9) and ignores
// its later events.
func (p *placement) died(member string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead[member] = true
	for s, h := range p.holders {
		delete(h, member)
		if p.readyOn[s] == member {
			delete(p.readyOn, s)
		}
	}
}

// ready is the number of servers ready somewhere, and the latest ready
// time among them.
func (p *placement) ready() (n int, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.readyOn {
		if at := p.readyAt[s]; at.After(last) {
			last = at
		}
	}
	return len(p.readyOn), last
}

// on is the servers ready on member.
func (p *placement) on(member string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for s, m := range p.readyOn {
		if m == member {
			out = append(out, s)
		}
	}
	return out
}

// readyElsewhere returns, for those of names ready on a member other
// than gone after since, when they became ready.
func (p *placement) readyElsewhere(names []string, gone string, since time.Time) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Time
	for _, s := range names {
		if m, ok := p.readyOn[s]; ok && m != gone && p.readyAt[s].After(since) {
			out = append(out, p.readyAt[s])
		}
	}
	return out
}

// quietSince is the time of the last activation or release.
func (p *placement) quietSince() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastChange
}

// overlapCount is how many activations began beside another one.
func (p *placement) overlapCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overlaps
}
