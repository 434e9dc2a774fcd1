package actors

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// NewSystem returns a protoactor actor system that logs through log
// (ProtoactorLogger) and does not log dead-letter requests. The caller
// shuts it down.
func NewSystem(log zerolog.Logger) *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return newSlogLogger(log) }),
		actor.WithDeadLetterRequestLogging(false),
		// Protoactor's dead-letter log throttle keeps a goroutine for one
		// interval after each burst; a short one keeps Close tidy.
		actor.WithDeadLetterThrottleInterval(100*time.Millisecond),
	)
}

// RegistryProps are the props of a parent actor that must outlive its
// own crashes and restart its children's: the registry, whose children
// are the server actors. Its own crash resumes it with its state
// (restarting it would stop every child). A child that crashes restarts
// into a clean state; one that crashes three times within a minute is
// stopped, and its parent sees it terminate. Its mailbox runs on d
// (nil: protoactor's default dispatcher); a panic is logged to log with
// its stack before supervision handles it.
func RegistryProps(producer actor.Producer, log zerolog.Logger, d *Dispatcher) *actor.Props {
	return actor.PropsFromProducer(producer,
		actor.WithGuardian(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.ResumeDirective })),
		actor.WithSupervisor(actor.NewOneForOneStrategy(3, time.Minute, func(any) actor.Directive { return actor.RestartDirective })),
		actor.WithReceiverMiddleware(recoverMiddleware(log)),
		withDispatcher(d),
	)
}

// ChildProps are the props of a child actor (a server actor): supervised
// by its parent's strategy (RegistryProps), its mailbox run on d (nil:
// protoactor's default dispatcher), a panic logged to log with its stack.
func ChildProps(producer actor.Producer, log zerolog.Logger, d *Dispatcher) *actor.Props {
	return actor.PropsFromProducer(producer, actor.WithReceiverMiddleware(recoverMiddleware(log)), withDispatcher(d))
}

// withDispatcher runs the mailbox on d, or on protoactor's default
// dispatcher when d is nil.
func withDispatcher(d *Dispatcher) actor.PropsOption {
	if d == nil {
		return func(*actor.Props) {}
	}
	return actor.WithDispatcher(d)
}

// recoverMiddleware logs an actor's panic with its stack (protoactor does
// not capture it) and lets supervision handle it.
func recoverMiddleware(log zerolog.Logger) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					log.Error().Str("actor", c.Self().Id).Str("message_type", fmt.Sprintf("%T", env.Message)).
						Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("actor panicked")
					panic(r)
				}
			}()
			next(c, env)
		}
	}
}
