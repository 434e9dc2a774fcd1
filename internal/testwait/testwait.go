// Package testwait bounds the waits of tests. Every helper waits at most a
// given time (Patience unless told otherwise) and then fails the test
// with a message naming what it waited for, so that a lost message or a
// stuck goroutine is a clear failure of one test, not a hang of the whole
// run that only the -timeout panic ends.
//
// The deadlines are not assertions about speed: Patience is long enough
// for a loaded machine running -race, and a test that passes never comes
// near it.
//
// The helpers call t.Fatalf, so they must be called from the test's own
// goroutine (as testing requires of FailNow).
package testwait

import (
	"context"
	"testing"
	"time"
)

// Patience is how long a helper waits for something that should happen
// promptly: a reply, a notification, a process exit, a goroutine's end.
const Patience = 30 * time.Second

// Recv returns the next value received from ch. It fails t when none
// arrives within Patience, or when ch is closed instead.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return RecvWithin(t, ch, Patience, what)
}

// RecvWithin is Recv with its own deadline d.
func RecvWithin[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("testwait: the channel closed while waiting for %s", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("testwait: waited %v for %s", d, what)
	}
	panic("unreachable")
}

// Done waits until ch yields a value or is closed (a done channel, or an
// error channel whose value the caller does not need). It fails t when
// neither happens within Patience.
func Done[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	timer := time.NewTimer(Patience)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("testwait: waited %v for %s", Patience, what)
	}
}

// Call runs f in a goroutine and waits for it to return (a WaitGroup's
// Wait, a Close that must not hang, ...). It fails t when f has not
// returned within Patience; f then keeps running in the background.
func Call(t testing.TB, what string, f func()) {
	t.Helper()
	Result(t, what, func() struct{} { f(); return struct{}{} })
}

// CallWithin is Call with its own deadline d (for work that takes a
// known, long time, plus Patience).
func CallWithin(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{}, 1)
	go func() { f(); done <- struct{}{} }()
	RecvWithin(t, done, d, what)
}

// Result runs f in a goroutine and returns its result (a process's Wait,
// a blocking read, ...). It fails t when f has not returned within
// Patience; f then keeps running in the background.
func Result[T any](t testing.TB, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return Recv(t, ch, what)
}

// Context returns a context that ends after Patience, or when the test
// ends. Pass it to calls that take one, and name the call in the
// assertion on its error: the deadline's error alone says only that time
// ran out.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	t.Cleanup(cancel)
	return ctx
}
