package testwait

import (
	"strings"
	"time"
)

// Event is one server-sent event: its id, its type ("" when the stream
// named none) and its data lines joined with "\n".
type Event struct {
	ID, Type, Data string
}

// Event reads lines up to the next dispatched server-sent event (comments
// and events without data are skipped, as an EventSource does) and
// returns it. It fails the test when the stream ends first, or when no
// event comes within Patience; what names what the event was awaited for.
func (lr *LineReader) Event(what string) Event {
	lr.t.Helper()
	return lr.EventWithin(Patience, what)
}

// EventWithin is Event with its own deadline d for the whole event.
func (lr *LineReader) EventWithin(d time.Duration, what string) Event {
	lr.t.Helper()
	deadline := time.Now().Add(d)
	var ev Event
	var data []string
	for {
		s, err, ok := lr.lineBefore(deadline)
		if !ok {
			lr.t.Fatalf("testwait: waited %v for an event: %s", d, what)
		}
		if err != nil {
			lr.t.Fatalf("testwait: the event stream ended (%v) while waiting for an event: %s", err, what)
		}
		field, value, _ := strings.Cut(s, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case s == "":
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev
			}
			ev = Event{}
		case strings.HasPrefix(s, ":"):
		case field == "id":
			ev.ID = value
		case field == "event":
			ev.Type = value
		case field == "data":
			data = append(data, value)
		}
	}
}
