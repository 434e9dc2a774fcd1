package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor/cluster/etcdstore"
)

// backendEtcd names the etcd stores: --token-store etcd (OAuth
// credentials shared by every process of a deployment) and
// --session-store etcd (the sealed sessions' deny list and extras).
const backendEtcd = "etcd"

// Environment of the etcd client's credentials (never flags: they would
// show in the process list).
const (
	envEtcdUsername = "MCPVISOR_ETCD_USERNAME"
	envEtcdPassword = "MCPVISOR_ETCD_PASSWORD"
)

// etcdFlags are the etcd client's flags, on the commands that can reach
// an etcd: auth, list and call (the token store) and supervise.
type etcdFlags struct {
	endpoints []string
	prefix    string
	ca        string
	cert      string
	key       string

	client *clientv3.Client // made by etcdClient, once
}

func (f *etcdFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.endpoints, "etcd-endpoint", nil,
		"with --token-store etcd or --session-store etcd: the etcd `URL` (repeatable), e.g. https://etcd-0:2379")
	fl.StringVar(&f.prefix, "etcd-prefix", etcdstore.DefaultPrefix, "start every etcd key with `PREFIX` (deployments sharing an etcd use different ones)")
	fl.StringVar(&f.ca, "etcd-ca", "", "verify etcd's TLS certificate with the CA in `FILE` (PEM)")
	fl.StringVar(&f.cert, "etcd-cert", "", "present the client certificate in `FILE` (PEM) to etcd")
	fl.StringVar(&f.key, "etcd-key", "", "the key of --etcd-cert, in `FILE` (PEM)")
}

// etcdClient returns the etcd client of the flags (and
// $MCPVISOR_ETCD_USERNAME/PASSWORD), made once. It is closed when the
// process ends.
func (f *etcdFlags) etcdClient() (*clientv3.Client, error) {
	if f.client != nil {
		return f.client, nil
	}
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	f.client = c
	return c, nil
}

// config is the etcd client configuration of the flags (and
// $MCPVISOR_ETCD_USERNAME/PASSWORD).
func (f *etcdFlags) config() (clientv3.Config, error) {
	if len(f.endpoints) == 0 {
		return clientv3.Config{}, errors.New("etcd: --etcd-endpoint is required")
	}
	cfg := clientv3.Config{
		Endpoints:   f.endpoints,
		DialTimeout: 5 * time.Second,
		Username:    os.Getenv(envEtcdUsername),
		Password:    os.Getenv(envEtcdPassword),
	}
	if f.ca != "" || f.cert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.ca != "" {
			pem, err := os.ReadFile(f.ca)
			if err != nil {
				return clientv3.Config{}, fmt.Errorf("etcd: --etcd-ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return clientv3.Config{}, fmt.Errorf("etcd: --etcd-ca %s holds no PEM certificate", f.ca)
			}
		}
		if f.cert != "" {
			pair, err := tls.LoadX509KeyPair(f.cert, f.key)
			if err != nil {
				return clientv3.Config{}, fmt.Errorf("etcd: --etcd-cert/--etcd-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// where describes the etcd store for logs (never a credential).
func (f *etcdFlags) where() string {
	return strings.Join(f.endpoints, ",") + " " + f.prefix
}
