package cluster

import (
	"context"
	"fmt"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/rs/zerolog"
	"go.uber.org/zap"
)

// membership is the member's membership provider and what the member
// needs of it beyond protoactor's interface.
type membership interface {
	pcluster.ClusterProvider
	// withdraw makes the others see this member leave (Leave).
	withdraw()
	// quiet is how long after withdraw every member has seen it.
	quiet() time.Duration
	// settle waits until the provider's own goroutines are done, or ctx
	// ends (Close, after Shutdown).
	settle(ctx context.Context)
}

// newMembership builds the provider Options ask for: etcd, or the
// static peers on the member's own membership endpoint (provider.go),
// over mutual TLS when tlsPair is set.
func newMembership(o Options, tlsPair *tlsConfigs, log zerolog.Logger, node func() any) (membership, error) {
	if o.Etcd == nil {
		return newPeersProvider(o, tlsPair, log, node)
	}
	cfg := *o.Etcd
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	p, err := etcd.NewWithConfig(o.EtcdPrefix, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: etcd membership: %w", ErrStart, err)
	}
	return &etcdMembership{Provider: p}, nil
}

// etcdMembership is protoactor's etcd provider. Its Shutdown deletes the
// member's key (the others' watches see it at once) and stops its watch.
type etcdMembership struct{ *etcd.Provider }

func (e *etcdMembership) withdraw()                  { _ = e.Provider.Shutdown(true) }
func (e *etcdMembership) quiet() time.Duration       { return time.Second }
func (e *etcdMembership) settle(ctx context.Context) {}

// The static-peers provider (provider.go).

func (p *peersProvider) withdraw() { p.stopServing() }

// quiet: two polls of the others.
func (p *peersProvider) quiet() time.Duration { return 2 * p.refresh }

// settle waits until the poll loop has returned (Shutdown ends it at
// once), or ctx ends.
func (p *peersProvider) settle(ctx context.Context) {
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}
