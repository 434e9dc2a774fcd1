package actors

import (
	"context"
	"time"
)

// withDefaultTimeout gives ctx a deadline d from now unless it already
// has one (the caller's deadline always wins). The returned cancel
// releases the timer; call it when the work is done, as with
// context.WithTimeout.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
