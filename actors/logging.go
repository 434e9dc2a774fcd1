package actors

import (
	"context"
	"log/slog"

	"github.com/rs/zerolog"
)

// slogHandler routes protoactor's slog output into the host's zerolog
// logger. It renames protoactor's "message" attribute, which would
// otherwise collide with zerolog's message field and produce a JSON object
// with two "message" keys; the process-wide zerolog.MessageFieldName
// belongs to the host and is left alone.
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
		a.Key = "actor_message"
	}
	return a
}
