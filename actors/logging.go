package actors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rs/zerolog"
)

// slogHandler routes protoactor's slog output into the host's zerolog
// logger. Protoactor attaches the actor message it is talking about (a
// dead letter, a supervision failure) as an attribute named "message".
// The handler logs only that message's type, as "actor_message": the
// value may carry a server's config (environment, headers: secrets), and
// the name would collide with zerolog's message field, producing a JSON
// object with two "message" keys. (zerolog.MessageFieldName is process
// wide and belongs to the host, so it is left alone.)
type slogHandler struct {
	inner slog.Handler
}

func newSlogLogger(log zerolog.Logger) *slog.Logger {
	inner := zerolog.NewSlogHandler(log.With().Str("lib", "protoactor").Logger())
	return slog.New(&slogHandler{inner: inner})
}

func (h *slogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *slogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(renameMessage(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	renamed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		renamed[i] = renameMessage(a)
	}
	return &slogHandler{inner: h.inner.WithAttrs(renamed)}
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	return &slogHandler{inner: h.inner.WithGroup(name)}
}

func renameMessage(a slog.Attr) slog.Attr {
	if a.Key == zerolog.MessageFieldName || a.Key == "message" {
		return slog.String("actor_message", fmt.Sprintf("%T", a.Value.Any()))
	}
	return a
}

// ProtoactorLogger returns the slog logger mcpvisor gives a protoactor
// actor system: protoactor's records go to log, with the attribute that
// may carry a message's content dropped. NewSystem uses it, and so does
// package cluster for the cluster's own actor system.
func ProtoactorLogger(log zerolog.Logger) *slog.Logger { return newSlogLogger(log) }
