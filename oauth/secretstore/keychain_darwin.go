//go:build darwin

package secretstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

const (
	securityTool = "/usr/bin/security"
	// securityNotFound is security's exit status for a missing item.
	securityNotFound = 44
	// securityTimeout bounds one call (a locked keychain may prompt).
	securityTimeout = 30 * time.Second
	// keychainMaxValue keeps one add-generic-password command, with the
	// value in base64, under security -i's 4,096-byte line.
	keychainMaxValue = 2000
	keychainLabel    = "mcpvisor-oauth-credentials"
)

// keychain is a vault of generic passwords in the user's default
// keychain, service Options.Service, account the base64url form of the
// name, through /usr/bin/security (no cgo). Values go in base64 on the
// tool's standard input (security -i), never on a command line another
// process could read.
type keychain struct{ service string }

func init() {
	platformBackends = append(platformBackends, backendSpec{
		name: BackendKeychain, auto: true,
		open: func(o Options) (func() (vault, error), error) {
			if _, err := exec.LookPath(securityTool); err != nil {
				return nil, err
			}
			return func() (vault, error) { return &keychain{service: o.Service}, nil }, nil
		},
	})
}

func account(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }

// run runs security with args (and stdin), bounded by securityTimeout.
func run(stdin string, args ...string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), securityTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, securityTool, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.Bytes(), ee.ExitCode(), fmt.Errorf("security %s: %s", args[0], strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), 0, err
}

func (k *keychain) get(name string) ([]byte, error) {
	out, code, err := run("", "find-generic-password", "-s", k.service, "-a", account(name), "-w")
	if code == securityNotFound {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	v, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, fmt.Errorf("keychain item %s: %w", account(name), err)
	}
	return v, nil
}

func (k *keychain) set(name, _ string, value []byte) error {
	line := fmt.Sprintf("add-generic-password -U -s %s -a %s -l %s -w %s\n",
		k.service, account(name), keychainLabel, base64.StdEncoding.EncodeToString(value))
	if len(line) >= 4096 {
		return fmt.Errorf("keychain: item %s is too long for the security tool", account(name))
	}
	if _, _, err := run(line, "-i"); err != nil {
		return err
	}
	// security -i does not fail on a failed command: read it back.
	got, err := k.get(name)
	if err != nil {
		return fmt.Errorf("keychain: the item was not stored: %w", err)
	}
	if !bytes.Equal(got, value) {
		return errors.New("keychain: the item read back differs from what was stored")
	}
	return nil
}

func (k *keychain) remove(name string) error {
	_, code, err := run("", "delete-generic-password", "-s", k.service, "-a", account(name))
	if code == securityNotFound {
		return nil
	}
	return err
}

// names reads the default keychain's item attributes (never its
// secrets) and keeps the accounts of our service.
func (k *keychain) names() ([]string, error) {
	out, _, err := run("", "dump-keychain")
	if err != nil {
		return nil, err
	}
	var names []string
	var svc, acct string
	flush := func() {
		if svc == k.service && acct != "" {
			if n, err := base64.RawURLEncoding.DecodeString(acct); err == nil {
				names = append(names, string(n))
			}
		}
		svc, acct = "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "keychain:"):
			flush()
		case strings.HasPrefix(line, `"svce"<blob>="`):
			svc = strings.TrimSuffix(strings.TrimPrefix(line, `"svce"<blob>="`), `"`)
		case strings.HasPrefix(line, `"acct"<blob>="`):
			acct = strings.TrimSuffix(strings.TrimPrefix(line, `"acct"<blob>="`), `"`)
		}
	}
	flush()
	return names, sc.Err()
}

func (k *keychain) maxValue() int { return keychainMaxValue }

func (k *keychain) describe() string {
	return fmt.Sprintf("macOS default keychain, generic passwords of service %q", k.service)
}

func (k *keychain) close() {}
