package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/rs/zerolog"
)

// discardLog swallows what net/http would log (the library writes only
// to the host's logger).
var discardLog = log.New(io.Discard, "", 0)

// healthPath is the membership endpoint's one route; it answers the
// member's automanaged NodeModel as JSON (protoactor's automanaged wire
// format, so the shape is the engine's).
const healthPath = "/_health"

// pollTimeout bounds one poll of one peer (automanaged's own figure).
const pollTimeout = 2 * time.Second

// serveTimeout bounds what one poll may take on the serving side.
const serveTimeout = 5 * time.Second

// maxNodeBytes caps a peer's answer.
const maxNodeBytes = 64 << 10

// peersProvider is the static-peer membership provider (automanaged's
// protocol, mcpvisor's implementation): each member serves its NodeModel
// on its membership endpoint, polls every peer's every MembershipPoll, and
// publishes the members that answered as the cluster's topology.
//
// mcpvisor runs its own rather than protoactor's automanaged provider
// because automanaged listens on 0.0.0.0, prints to stdout through echo,
// reads proxy settings from the environment, polls over plain http:// and
// has no stop signal for its poll loop. This one listens where Options
// say, writes nothing, and with Options.TLS serves and polls over mutual
// TLS (a peer without a certificate of the members' CA is refused, and a
// member trusts no answer from a peer without one).
//
// Concurrency: the poll loop is one goroutine (run), started by
// StartMember or StartClient and ended by Shutdown; done is closed when
// it has returned. The health endpoint is served by its http.Server's
// goroutines and reads only node, which is safe for concurrent use.
type peersProvider struct {
	log      zerolog.Logger
	name     string // the cluster's name: answers of other clusters are ignored
	peers    []string
	refresh  time.Duration // the poll period (Options.MembershipPoll)
	listener net.Listener  // the membership endpoint (TLS-wrapped with Options.TLS)
	server   *http.Server
	client   *http.Client
	scheme   string // "https" with Options.TLS, else "http"

	ctx  context.Context // ends at Shutdown: stops the loop and its polls
	stop context.CancelFunc
	done chan struct{} // closed when run returns (by Shutdown if it never started)

	mu      sync.Mutex // guards started and the Shutdown of a provider not started
	started bool
}

// newPeersProvider listens on the membership endpoint Host:ProviderPort
// (with tlsPair, over mutual TLS) and returns the provider; node is
// called on each health request for the member's NodeModel. Nothing is
// served until StartMember.
func newPeersProvider(o Options, tlsPair *tlsConfigs, log zerolog.Logger, node func() any) (*peersProvider, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.ProviderPort)))
	if err != nil {
		return nil, fmt.Errorf("%w: membership endpoint: %w", ErrStart, err)
	}
	transport := &http.Transport{
		Proxy:                 nil, // the library reads no environment
		DialContext:           (&net.Dialer{Timeout: pollTimeout, KeepAlive: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   pollTimeout,
		ResponseHeaderTimeout: pollTimeout,
	}
	scheme := "http"
	if tlsPair != nil {
		ln = tls.NewListener(ln, tlsPair.server)
		transport.TLSClientConfig = tlsPair.client
		scheme = "https"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+healthPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(node())
	})
	ctx, stop := context.WithCancel(context.Background())
	return &peersProvider{
		log:      log,
		name:     o.Name,
		peers:    o.Peers,
		refresh:  o.MembershipPoll,
		listener: ln,
		server: &http.Server{
			Handler: mux,
			// Bounds for a peer that connects and stalls (ReadTimeout
			// also bounds a TLS handshake); the pollers' keep-alive
			// connections stay open between polls (IdleTimeout).
			ReadHeaderTimeout: serveTimeout,
			ReadTimeout:       serveTimeout,
			WriteTimeout:      serveTimeout,
			IdleTimeout:       90 * time.Second,
			ErrorLog:          discardLog,
		},
		client: &http.Client{Transport: transport, Timeout: pollTimeout},
		scheme: scheme,
		ctx:    ctx,
		stop:   stop,
		done:   make(chan struct{}),
	}, nil
}

// StartMember serves the membership endpoint and starts polling the
// peers (protoactor's ClusterProvider).
func (p *peersProvider) StartMember(c *pcluster.Cluster) error {
	p.start(c, true)
	return nil
}

// StartClient polls the peers without serving (protoactor's
// ClusterProvider; mcpvisor runs members only).
func (p *peersProvider) StartClient(c *pcluster.Cluster) error {
	p.start(c, false)
	return nil
}

func (p *peersProvider) start(c *pcluster.Cluster, serve bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.ctx.Err() != nil {
		return // started already, or shut down before it started
	}
	p.started = true
	if serve {
		go func() { _ = p.server.Serve(p.listener) }()
	}
	go p.run(c)
}

// Shutdown stops the poll loop and closes the membership endpoint
// (protoactor's ClusterProvider). It is idempotent and does not wait:
// settle does.
func (p *peersProvider) Shutdown(bool) error {
	p.mu.Lock()
	if p.ctx.Err() == nil {
		p.stop()
		if !p.started {
			close(p.done)
		}
	}
	p.mu.Unlock()
	p.stopServing()
	p.client.CloseIdleConnections()
	return nil
}

// stopServing closes the membership endpoint, so that the other members
// see this one leave at their next poll.
func (p *peersProvider) stopServing() {
	_ = p.server.Close()
	_ = p.listener.Close()
}

// run polls the peers every refresh period until Shutdown, and publishes
// each round's answers as the topology. A round in which no peer
// answered (this member's own endpoint included) publishes nothing: the
// member keeps its last topology rather than dropping everyone.
func (p *peersProvider) run(c *pcluster.Cluster) {
	defer close(p.done)
	for {
		members, err := p.poll()
		if p.ctx.Err() != nil {
			return
		}
		if err != nil && len(members) == 0 {
			p.log.Warn().Err(err).Msg("no member's membership endpoint answered")
		} else {
			if p.ctx.Err() != nil {
				return
			}
			c.MemberList.UpdateClusterTopology(members)
		}
		t := time.NewTimer(p.refresh)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// poll asks every peer for its NodeModel at once and returns the members
// of this cluster that answered, in the order of the peers, and the
// first error.
func (p *peersProvider) poll() ([]*pcluster.Member, error) {
	nodes := make([]*automanaged.NodeModel, len(p.peers))
	errs := make([]error, len(p.peers))
	var wg sync.WaitGroup
	for i, peer := range p.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = p.pollOne(peer)
		}()
	}
	wg.Wait()
	var members []*pcluster.Member
	var first error
	for i, n := range nodes {
		if errs[i] != nil {
			if first == nil {
				first = errs[i]
			}
			continue
		}
		if n == nil || n.ClusterName != p.name {
			continue
		}
		members = append(members, &pcluster.Member{Id: n.ID, Host: n.Address, Port: int32(n.Port), Kinds: n.Kinds})
	}
	return members, first
}

// pollOne reads peer's NodeModel.
func (p *peersProvider) pollOne(peer string) (*automanaged.NodeModel, error) {
	ctx, cancel := context.WithTimeout(p.ctx, pollTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.scheme+"://"+peer+healthPath, nil)
	if err != nil {
		return nil, fmt.Errorf("membership endpoint %s: %w", peer, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("membership endpoint %s: %w", peer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("membership endpoint %s: status %d", peer, resp.StatusCode)
	}
	var n automanaged.NodeModel
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxNodeBytes)).Decode(&n); err != nil {
		return nil, fmt.Errorf("membership endpoint %s: decoding its answer: %w", peer, err)
	}
	return &n, nil
}
