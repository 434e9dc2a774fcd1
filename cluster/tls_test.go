package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/internal/testpki"
)

// TestOnlyMembersSpeakToAClusterWithTLS: two member processes with
// mutual TLS (a test CA, loopback certificates) place servers on both
// and serve calls across each other. A bare protoactor remote in the
// test process, as an outsider would run one, sends member B the
// messages a member sends (an ActivationRequest to B's placement actor
// for a server B runs, then a CallTool to the grain it names): with no
// credentials, and with a certificate of another CA, nothing gets
// through — no activation answer, no call. The same remote with the
// members' credentials gets both, which shows the outsider's messages
// are the ones that work and only the credentials are missing. The
// membership endpoint likewise answers only a client with a member
// certificate. Without TLS on the members, the bare remote activates
// and calls, and plain HTTP reads the membership endpoint.
func TestOnlyMembersSpeakToAClusterWithTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two member processes")
	}
	const servers = 24 // some on each member (see TestAMemberRefusesToActivateAServerItDoesNotOwn)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "mcpvisor test cluster CA")
	mf := ca.WriteMember(t, dir, "member")
	of := testpki.NewCA(t, "another CA").WriteMember(t, dir, "outsider")
	memberTLS, err := LoadTLS(mf.Cert, mf.Key, mf.CA)
	require.NoError(t, err)
	otherTLS, err := LoadTLS(of.Cert, of.Key, of.CA)
	require.NoError(t, err)

	bin := buildMember(t)
	mockURL := serveMock(t)
	log := newEventLog()
	cp := newClusterPorts(t, 2)
	tlsArgs := []string{"-tls-cert", mf.Cert, "-tls-key", mf.Key, "-tls-ca", mf.CA}
	a := startProc(t, bin, mockURL, servers, cp, 0, log, tlsArgs...)
	b := startProc(t, bin, mockURL, servers, cp, 1, log, tlsArgs...)
	log.waitFor(t, "every server ready, some on each member", 60*time.Second, func(evs []MemberEvent) bool {
		return len(readyOn(evs)) == servers && len(serversOn(evs, a.id)) > 0 && len(serversOn(evs, b.id)) > 0
	})
	// The members work together: A reaches every server, B's over TLS.
	for name := range readyOn(log.snapshot()) {
		res, _, err := a.call(name)
		require.NoError(t, err)
		require.True(t, res.OK, "a call to %s through A: %s %s", name, res.Class, res.Error)
	}
	onB := serversOn(log.snapshot(), b.id)
	target := onB[0]
	before := len(log.snapshot())

	// The membership endpoint.
	health := fmt.Sprintf("127.0.0.1:%d", cp.ports[3])
	pool := ca.Pool()
	for _, probe := range []struct {
		name   string
		scheme string
		tls    *tls.Config
	}{
		{"plain HTTP", "http", nil},
		{"TLS without a client certificate", "https", &tls.Config{RootCAs: pool}},
		{"TLS with a certificate of another CA", "https", clientSide(otherTLS, pool)},
	} {
		body, err := getHealth(probe.scheme, health, probe.tls)
		require.Error(t, err, "%s read B's membership endpoint: %s", probe.name, body)
		require.NotContains(t, body, b.id, probe.name)
	}
	body, err := getHealth("https", health, memberTLS)
	require.NoError(t, err, "a member certificate reads B's membership endpoint")
	require.Contains(t, body, b.id)

	// The remote (gRPC) port. One remote in this process at a time, and
	// none while a member runs here (notes hazard 7).
	oneMemberPerProcess.Lock()
	defer oneMemberPerProcess.Unlock()
	bAddr := fmt.Sprintf("127.0.0.1:%d", cp.ports[1])
	for _, outsider := range []struct {
		name string
		tls  *tls.Config
	}{
		{"a remote with no credentials", nil},
		{"a remote with a certificate of another CA", clientSide(otherTLS, pool)},
	} {
		err := activateAndCall(t, outsider.tls, bAddr, target)
		require.Error(t, err, "%s activated and called %s on B", outsider.name, target)
		t.Logf("%s: %v", outsider.name, err)
	}
	require.NoError(t, activateAndCall(t, memberTLS, bAddr, target), "the same messages with the members' credentials")
	for _, ev := range log.snapshot()[before:] {
		require.False(t, ev.Type == MemberActivated || ev.Type == MemberReleased, "%s %s on %s after the outsiders", ev.Type, ev.Server, ev.Member)
	}
	for _, name := range onB {
		res, _, err := a.call(name)
		require.NoError(t, err)
		require.True(t, res.OK, "a call to %s through A after the outsiders: %s %s", name, res.Class, res.Error)
	}
}

// clientSide is c's certificate presented to a server that pool vouches
// for (an outsider that trusts the cluster's CA but holds no certificate
// of it).
func clientSide(c *tls.Config, pool *x509.CertPool) *tls.Config {
	c = c.Clone()
	c.RootCAs = pool
	return c
}

// getHealth GETs the membership endpoint at addr and returns its body;
// an answer other than 200 is an error.
func getHealth(scheme, addr string, c *tls.Config) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(scheme + "://" + addr + healthPath)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), nil
}

// activateAndCall runs a protoactor remote in this process (over mutual
// TLS with c, or plain for nil) and, as a member would, asks the
// placement actor of the member at addr to activate server, then calls
// the server's echo tool on the grain it answers with. It returns the
// first failure, or nil when the tool answered. The caller holds
// oneMemberPerProcess.
func activateAndCall(t *testing.T, c *tls.Config, addr, server string) error {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actors.ProtoactorLogger(zerolog.Nop()) }))
	defer sys.Shutdown()
	var opts []remote.ConfigOption
	if c != nil {
		pair, err := mutualTLS(c)
		require.NoError(t, err)
		opts = remoteOptions(pair)
	}
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", freePorts(t, 1)[0], opts...))
	r.Start()
	defer r.Shutdown(true)
	placement := actor.NewPID(addr, disthash.PartitionActivatorActorName)
	res, err := sys.Root.RequestFuture(placement, &pcluster.ActivationRequest{ClusterIdentity: pcluster.NewClusterIdentity(server, grainKind)}, 5*time.Second).Result()
	if err != nil {
		return fmt.Errorf("activation request: %w", err)
	}
	act, ok := res.(*pcluster.ActivationResponse)
	if !ok || act.Pid == nil {
		return fmt.Errorf("activation request: answer %T %v", res, res)
	}
	res, err = sys.Root.RequestFuture(act.Pid, &wire.CallTool{Server: server, Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`), TimeoutMs: 5000}, 10*time.Second).Result()
	if err != nil {
		return fmt.Errorf("call: %w", err)
	}
	cr, ok := res.(*wire.CallResult)
	if !ok {
		return fmt.Errorf("call: answer %T", res)
	}
	if err := errorOf(server, cr); err != nil {
		return fmt.Errorf("call: %w", err)
	}
	return nil
}

// TestAMemberBeyondLoopbackWithoutTLSIsRefused: a Host that is not
// loopback with no TLS is ErrInsecure (wrapped in ErrStart) before
// anything listens; bad TLS options are ErrTLSConfig.
func TestAMemberBeyondLoopbackWithoutTLSIsRefused(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.1", "example.com"} {
		_, err := Start(context.Background(), Options{Host: host, Port: 1, ProviderPort: 2, Peers: []string{"x:2"}})
		require.ErrorIs(t, err, ErrStart, "host %q", host)
		require.ErrorIs(t, err, ErrInsecure, "host %q", host)
	}
	for _, c := range []*tls.Config{{}, {Certificates: []tls.Certificate{{}}}, {Certificates: []tls.Certificate{{}}, RootCAs: x509.NewCertPool(), InsecureSkipVerify: true}} {
		_, err := Start(context.Background(), Options{Host: "0.0.0.0", Port: 1, ProviderPort: 2, Peers: []string{"x:2"}, TLS: c})
		require.ErrorIs(t, err, ErrTLSConfig)
	}
	dir := t.TempDir()
	_, err := LoadTLS(filepath.Join(dir, "missing.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ca.pem"))
	require.ErrorIs(t, err, ErrTLSConfig)
	_, err = LoadTLS(dir, dir, dir)
	require.ErrorIs(t, err, ErrTLSConfig)
}
