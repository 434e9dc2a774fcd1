package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// ErrInsecure: the member would listen beyond loopback with no
// Options.TLS, so anyone who reaches its ports could speak to the
// cluster (activate servers, call tools). Start returns it wrapped in
// ErrStart.
var ErrInsecure = errors.New("mcpvisor cluster: a member listening beyond loopback needs TLS (Options.TLS)")

// ErrTLSConfig: Options.TLS (or the files given to LoadTLS) cannot
// make mutual TLS: no certificate, no CA, or a file that does not parse.
var ErrTLSConfig = errors.New("mcpvisor cluster: bad TLS configuration")

// maxTLSFileBytes caps each file LoadTLS reads.
const maxTLSFileBytes = 1 << 20

// LoadTLS reads a member's certificate and key (PEM) and the CA
// certificate(s) (PEM) that sign every member's certificate, and returns
// the configuration for Options.TLS. The member presents the certificate
// both as a server (to the members that dial it) and as a client (to the
// members it dials), so it must allow both uses (extended key usages
// serverAuth and clientAuth, or none) and name every address the others
// dial it by (the Host of Options; IP or DNS subject alternative names).
// Errors wrap ErrTLSConfig and name the file, never its content.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	certPEM, err := readTLSFile("certificate", certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readTLSFile("key", keyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := readTLSFile("CA", caFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s with key %s: %w", ErrTLSConfig, certFile, keyFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrTLSConfig, caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// readTLSFile reads a regular file of at most maxTLSFileBytes.
func readTLSFile(what, path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no %s file", ErrTLSConfig, what)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s file: %w", ErrTLSConfig, what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %s file: %w", ErrTLSConfig, what, err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxTLSFileBytes {
		return nil, fmt.Errorf("%w: %s file %s: not a regular file of at most %d bytes", ErrTLSConfig, what, path, maxTLSFileBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("%w: %s file %s: %w", ErrTLSConfig, what, path, err)
	}
	return b, nil
}

// tlsConfigs are the two sides of a member's mutual TLS, derived from
// Options.TLS: server (its remote and membership endpoints: a client
// certificate signed by the CA is required) and client (what it dials:
// the peer's certificate is verified against the CA and the address).
type tlsConfigs struct {
	server, client *tls.Config
}

// mutualTLS derives the member's server and client configurations from
// c, or returns nil for nil (plain; loopback only, see checkExposure).
func mutualTLS(c *tls.Config) (*tlsConfigs, error) {
	if c == nil {
		return nil, nil
	}
	if len(c.Certificates) == 0 && (c.GetCertificate == nil || c.GetClientCertificate == nil) {
		return nil, fmt.Errorf("%w: Options.TLS has no certificate (Certificates, or both GetCertificate and GetClientCertificate)", ErrTLSConfig)
	}
	if c.RootCAs == nil {
		// Without it the system roots would vouch for members.
		return nil, fmt.Errorf("%w: Options.TLS has no RootCAs (the CA that signs the members' certificates)", ErrTLSConfig)
	}
	if c.InsecureSkipVerify {
		return nil, fmt.Errorf("%w: Options.TLS skips verification", ErrTLSConfig)
	}
	server := c.Clone()
	server.ClientAuth = tls.RequireAndVerifyClientCert
	if server.ClientCAs == nil {
		server.ClientCAs = c.RootCAs
	}
	client := c.Clone()
	for _, cfg := range []*tls.Config{server, client} {
		if cfg.MinVersion < tls.VersionTLS12 {
			cfg.MinVersion = tls.VersionTLS12
		}
	}
	return &tlsConfigs{server: server, client: client}, nil
}

// grpcServerOption makes the remote's gRPC server require mutual TLS.
func (t *tlsConfigs) grpcServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(t.server))
}

// grpcDialOption makes the remote dial the other members over mutual TLS.
func (t *tlsConfigs) grpcDialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(t.client))
}

// isLoopbackHost says whether host names only loopback interfaces:
// "localhost" or a loopback IP. "" and 0.0.0.0 (every interface) are not.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
