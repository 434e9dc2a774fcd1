package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// Polling returns the supervisor's polls: requests it sends a server
// again and again, publishing each change of the answer as an event.
func (s *Supervisor) Polling() Polling { return Polling{s} }

// Polling is a Supervisor's polls (PollSpec): a handle got from
// Supervisor.Polling, safe for concurrent use like the Supervisor.
type Polling struct{ s *Supervisor }

// Subscribe polls a tool call or a resource read at an interval and
// publishes an EventPollChanged for the first result and for every result
// that differs from the one before; polling carries on across reconnects
// until Unsubscribe or Close. It returns the subscription's id.
func (pl Polling) Subscribe(spec PollSpec) (string, error) {
	s := pl.s
	switch {
	case spec.Tool != "" && spec.URI != "":
		return "", errors.New("mcpvisor: a poll is a tool call or a resource read, not both")
	case spec.Tool == "" && (spec.URI == "" || spec.Server == ""):
		return "", errors.New("mcpvisor: a poll needs a tool, or a server and a URI")
	case spec.Tool != "":
		if _, ok := s.pool.Load().toolsByName.Get(spec.Tool); !ok {
			if _, ok := s.pool.Load().builtinByName[spec.Tool]; !ok {
				return "", fmt.Errorf("%w: %q", ErrUnknownTool, spec.Tool)
			}
		}
	default:
		if _, err := s.handle(spec.Server); err != nil {
			return "", err
		}
	}
	if spec.Interval == 0 {
		spec.Interval = DefaultPollInterval
	}
	spec.Interval = max(spec.Interval, MinPollInterval)
	subs := s.opts.host.subs
	subs.mu.Lock()
	defer subs.mu.Unlock()
	if subs.closed {
		return "", ErrClosed
	}
	subs.nextPoll++
	ctx, cancel := context.WithCancel(context.Background())
	p := &poll{id: "poll-" + strconv.FormatUint(subs.nextPoll, 10), spec: spec, cancel: cancel, done: make(chan struct{})}
	subs.polls[p.id] = p
	subs.wg.Add(1)
	routine.Go("subscriptions.poll", func() {
		defer subs.wg.Done()
		defer close(p.done)
		pl.runPoll(ctx, p)
	})
	return p.id, nil
}

// Unsubscribe stops a polling subscription (ErrUnknownPoll for an
// unknown id); it returns once the poller has stopped.
func (pl Polling) Unsubscribe(id string) error {
	s := pl.s
	subs := s.opts.host.subs
	subs.mu.Lock()
	p, ok := subs.polls[id]
	delete(subs.polls, id)
	subs.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownPoll, id)
	}
	p.cancel()
	<-p.done
	return nil
}

// List returns the live polling subscriptions by id.
func (pl Polling) List() map[string]PollSpec {
	s := pl.s
	subs := s.opts.host.subs
	subs.mu.Lock()
	defer subs.mu.Unlock()
	out := make(map[string]PollSpec, len(subs.polls))
	for id, p := range subs.polls {
		out[id] = p.spec
	}
	return out
}
