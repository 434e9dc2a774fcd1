//go:build linux

package secretstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/oauth"
)

// requireVar makes a missing service a failure rather than a skip (make
// test sets it: the Makefile installs gnome-keyring, dbus and keyutils).
const requireVar = "MCPVISOR_REQUIRE_KEYRING"

// helperVar runs the test binary as one of the refreshing processes.
const helperVar = "MCPVISOR_SECRETSTORE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperVar) != "" {
		os.Exit(refreshHelper())
	}
	os.Exit(m.Run())
}

func missing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv(requireVar) != "" {
		t.Fatalf("%s (make deps installs it)", what)
	}
	t.Skipf("%s (make deps installs it; %s=1 makes this a failure)", what, requireVar)
}

// keyringSession is a private session bus with Debian's gnome-keyring on
// it, started the way a desktop session does (dbus-run-session), with its
// files under home.
type keyringSession struct {
	address string
	home    string
}

func startKeyring(t *testing.T) *keyringSession {
	t.Helper()
	for _, bin := range []string{"dbus-run-session", "dbus-send", "gnome-keyring-daemon"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing(t, bin+" is not installed")
		}
	}
	home := t.TempDir()
	run := filepath.Join(home, "run")
	require.NoError(t, os.Mkdir(run, 0o700))
	cmd := exec.Command("dbus-run-session", "--", "sh", "testdata/keyring-session.sh")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_RUNTIME_DIR="+run, "XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("the keyring session did not end 10 s after its stdin closed")
		}
	})
	_, err = io.WriteString(stdin, "test-password\n")
	require.NoError(t, err)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	select {
	case addr := <-line:
		require.True(t, strings.HasPrefix(addr, "unix:"), "no bus address from the keyring session; stderr: %s", stderr.String())
		return &keyringSession{address: addr, home: home}
	case <-time.After(30 * time.Second):
		t.Fatalf("the keyring session gave no bus address in 30 s; stderr: %s", stderr.String())
		return nil
	}
}

// lockedBuffer collects a process's stderr while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// keyctlAvailable skips (or fails) where the kernel keyring is blocked.
func keyctlAvailable(t *testing.T) {
	t.Helper()
	if _, err := openKernelKeyring("mcpvisor-probe"); err != nil {
		missing(t, "the kernel keyring is not usable here: "+err.Error())
	}
}

// backendCase is one OS store under test, with a private service name.
type backendCase struct {
	name string
	// opts starts the service and returns the options of a store in it,
	// with the directory of the service's own files ("" if none).
	opts func(t *testing.T) (Options, string)
}

func backends() []backendCase {
	return []backendCase{
		{BackendSecretService, func(t *testing.T) (Options, string) {
			ks := startKeyring(t)
			return Options{Backend: BackendSecretService, DBusAddress: ks.address, Service: "mcpvisor-test",
				File: filepath.Join(t.TempDir(), "oauth-tokens.json")}, ks.home
		}},
		{BackendKeyctl, func(t *testing.T) (Options, string) {
			keyctlAvailable(t)
			svc := fmt.Sprintf("mcpvisor-test-%d-%d", os.Getpid(), time.Now().UnixNano())
			t.Cleanup(func() { wipeKeyctl(svc) })
			return Options{Backend: BackendKeyctl, Service: svc, File: filepath.Join(t.TempDir(), "oauth-tokens.json")}, ""
		}},
	}
}

// wipeKeyctl removes a test's keys and keyring from the kernel.
func wipeKeyctl(service string) {
	k, err := openKernelKeyring(service)
	if err != nil {
		return
	}
	names, _ := k.names()
	for _, n := range names {
		_ = k.remove(n)
	}
	_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, k.ring, 0, 0, 0)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func entry(server, issuer, rt string, at time.Time) *oauth.Entry {
	return &oauth.Entry{ServerURL: server, Issuer: issuer, Scope: "mcp:tools", UpdatedAt: at,
		Client: &oauth.ClientInfo{ClientID: "client-1", ClientSecret: "client-secret-" + rt, AuthMethod: oauth.AuthMethodBasic, Source: "dynamic",
			RedirectURIs: []string{"http://127.0.0.1:8976/callback"}},
		Token: &oauth.Token{AccessToken: "access-" + rt, TokenType: "Bearer", RefreshToken: rt, Scope: "mcp:tools", Expiry: at.Add(time.Hour).UTC()}}
}

// The oauth.Store contract on each OS store: what is saved loads back
// whole; an empty issuer loads the newest; Delete by issuer or all;
// List sorted; a record over the backend's item limit is split and read
// back whole; Lock excludes another holder.
func TestStoreContract(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			o, _ := bc.opts(t)
			st, info, err := Open(ctx(t), o)
			require.NoError(t, err)
			assert.Equal(t, bc.name, info.Backend)
			assert.NotEmpty(t, info.Where)
			s := st.(*Store)
			now := time.Now().UTC().Truncate(time.Second)
			a1 := entry("https://a.example/mcp", "https://as1.example", "rt-a1", now.Add(-time.Minute))
			a2 := entry("https://a.example/mcp", "https://as2.example", "rt-a2", now)
			b := entry("https://b.example/mcp", "https://as1.example", "rt-b", now)
			for _, e := range []*oauth.Entry{a1, a2, b} {
				require.NoError(t, s.Save(ctx(t), e))
			}
			got, err := s.Load(ctx(t), a1.ServerURL, a1.Issuer)
			require.NoError(t, err)
			assert.Equal(t, a1, got, "an entry loads back field for field")
			got, err = s.Load(ctx(t), a1.ServerURL, "")
			require.NoError(t, err)
			assert.Equal(t, a2, got, "no issuer: the newest entry of the server")
			got, err = s.Load(ctx(t), "https://none.example/mcp", "")
			require.NoError(t, err)
			assert.Nil(t, got)

			// A record far over the item limit (keyctl: 32,000 bytes).
			big := entry("https://big.example/mcp", "https://as1.example", "rt-big", now)
			big.Token.AccessToken = strings.Repeat("A", 70_000)
			require.NoError(t, s.Save(ctx(t), big))
			got, err = s.Load(ctx(t), big.ServerURL, big.Issuer)
			require.NoError(t, err)
			assert.Equal(t, big, got, "a split record reads back whole")
			big.Token.AccessToken = "small again"
			require.NoError(t, s.Save(ctx(t), big))
			v, err := s.open()
			require.NoError(t, err)
			names, err := v.names()
			v.close()
			require.NoError(t, err)
			for _, n := range names {
				assert.False(t, strings.HasPrefix(n, chunkPrefix), "the old record's chunks are gone: %s", n)
			}

			list, err := s.List(ctx(t))
			require.NoError(t, err)
			require.Len(t, list, 4)
			assert.Equal(t, []string{a1.Issuer, a2.Issuer}, []string{list[0].Issuer, list[1].Issuer})
			assert.Equal(t, []string{"https://b.example/mcp", "https://big.example/mcp"}, []string{list[2].ServerURL, list[3].ServerURL})

			require.NoError(t, s.Delete(ctx(t), a1.ServerURL, a1.Issuer))
			got, err = s.Load(ctx(t), a1.ServerURL, "")
			require.NoError(t, err)
			assert.Equal(t, a2, got)
			require.NoError(t, s.Delete(ctx(t), big.ServerURL, ""))
			require.NoError(t, s.Delete(ctx(t), a1.ServerURL, ""))
			list, err = s.List(ctx(t))
			require.NoError(t, err)
			assert.Equal(t, []*oauth.Entry{b}, list)

			unlock, err := s.Lock(ctx(t), "x")
			require.NoError(t, err)
			other, _, err := Open(ctx(t), o)
			require.NoError(t, err)
			short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err = other.Lock(short, "x")
			assert.ErrorIs(t, err, context.DeadlineExceeded, "a second store of the same backend waits for the lock")
			unlock()
		})
	}
}

// A file store migrates on first use: its entries are in the OS store,
// the file is gone, and no refresh token is anywhere on disk (the
// keyring's own files included).
func TestFileStoreMigratesAndLeavesNoTokenOnDisk(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			o, home := bc.opts(t)
			fileDir := filepath.Dir(o.File)
			now := time.Now().UTC().Truncate(time.Second)
			old := &oauth.FileStore{Path: o.File}
			e1 := entry("https://a.example/mcp", "https://as.example", "rt-migrate-one-0123456789", now)
			e2 := entry("https://b.example/mcp", "https://as.example", "rt-migrate-two-0123456789", now)
			require.NoError(t, old.Save(ctx(t), e1))
			require.NoError(t, old.Save(ctx(t), e2))
			leftover := filepath.Join(fileDir, "."+filepath.Base(o.File)+".123.tmp")
			require.NoError(t, os.WriteFile(leftover, []byte(`{"refresh_token":"rt-migrate-one-0123456789"}`), 0o600))
			secrets := []string{e1.Token.RefreshToken, e2.Token.RefreshToken, e1.Client.ClientSecret}
			requireOnDisk(t, fileDir, secrets[0], true) // the check can see a token on disk

			st, info, err := Open(ctx(t), o)
			require.NoError(t, err)
			assert.Equal(t, 2, info.Migrated)
			assert.Contains(t, info.String(), "2 entries migrated")
			_, err = os.Stat(o.File)
			assert.ErrorIs(t, err, fs.ErrNotExist, "the file store is removed")
			for _, e := range []*oauth.Entry{e1, e2} {
				got, err := st.Load(ctx(t), e.ServerURL, e.Issuer)
				require.NoError(t, err)
				assert.Equal(t, e, got)
			}
			// Opening again migrates nothing (the file is gone).
			_, info, err = Open(ctx(t), o)
			require.NoError(t, err)
			assert.Zero(t, info.Migrated)

			// A refresh rotates the token in the OS store.
			rotated := entry(e1.ServerURL, e1.Issuer, "rt-rotated-abcdefghij", now.Add(time.Minute))
			require.NoError(t, st.Save(ctx(t), rotated))
			secrets = append(secrets, rotated.Token.RefreshToken)
			dirs := []string{fileDir}
			if home != "" {
				dirs = append(dirs, home)
			}
			for _, d := range dirs {
				for _, s := range secrets {
					requireOnDisk(t, d, s, false)
				}
			}
		})
	}
}

// requireOnDisk checks whether any file under dir contains secret.
func requireOnDisk(t *testing.T, dir, secret string, want bool) {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
			found = append(found, p)
		}
		return nil
	})
	if want {
		require.NotEmpty(t, found, "%q should be on disk under %s", secret, dir)
	} else {
		require.Empty(t, found, "%q is in plain text on disk", secret)
	}
}

// refreshHelper is one of the processes of TestTwoProcessesRefreshOnce:
// it opens the store, builds the server's token source, says "ready",
// waits for "go" on stdin and asks for a token, which must be
// refreshed, and prints the result as JSON.
func refreshHelper() int {
	var cfg struct {
		Options   Options
		ServerURL string
	}
	if err := json.Unmarshal([]byte(os.Getenv(helperVar)), &cfg); err != nil {
		fmt.Println(`{"error":"bad helper config"}`)
		return 2
	}
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	report := func(v map[string]any) int {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
		if v["error"] != nil {
			return 1
		}
		return 0
	}
	st, _, err := Open(c, cfg.Options)
	if err != nil {
		return report(map[string]any{"error": err.Error()})
	}
	src, err := oauth.NewSource(oauth.Config{ServerURL: cfg.ServerURL, Store: st, RefreshMargin: time.Millisecond})
	if err != nil {
		return report(map[string]any{"error": err.Error()})
	}
	fmt.Println("ready")
	if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); strings.TrimSpace(line) != "go" {
		return report(map[string]any{"error": "no go"})
	}
	tok, err := src.Token(c)
	if err != nil {
		return report(map[string]any{"error": err.Error()})
	}
	return report(map[string]any{"token": tok, "refreshes": src.Status().Refreshes})
}

// helperProc is a running refreshHelper.
type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startHelper(t *testing.T, cfg any) *helperProc {
	t.Helper()
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperVar+"="+string(b))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = time.Second
	require.NoError(t, cmd.Start())
	h := &helperProc{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = testwait.Result(t, "the exit of the secret store's helper process", cmd.Wait)
	})
	return h
}

func (h *helperProc) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		require.True(t, ok, "the helper process ended before %s", what)
		return l
	case <-time.After(60 * time.Second):
		t.Fatalf("the helper process did not print %s in 60 s", what)
		return ""
	}
}

// Two processes find the same expired token in the OS store and ask for
// a token at the same moment: exactly one refresh reaches the
// authorization server (which rotates refresh tokens and flags reuse),
// the other process adopts the result, and the rotated refresh token is
// what the store holds.
func TestTwoProcessesRefreshOnce(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			o, _ := bc.opts(t)
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			t.Cleanup(upstream.Close)
			as, err := oauthtest.New(upstream.URL, 1) // the first access token lives 1 s
			require.NoError(t, err)
			t.Cleanup(as.Close)
			serverURL := as.URL + "/mcp"

			st, _, err := Open(ctx(t), o)
			require.NoError(t, err)
			src, err := oauth.NewSource(oauth.Config{ServerURL: serverURL, Store: st})
			require.NoError(t, err)
			require.NoError(t, src.Login(ctx(t), &oauth.HeadlessUserAgent{}, ""))
			canonical, err := oauth.CanonicalResource(serverURL)
			require.NoError(t, err)
			first, err := st.Load(ctx(t), canonical, "")
			require.NoError(t, err)
			require.NotNil(t, first)
			require.NotEmpty(t, first.Token.RefreshToken)
			as.SetExpiresIn(3600) // what the refresh issues outlives the test

			cfg := map[string]any{"Options": o, "ServerURL": serverURL}
			a, b := startHelper(t, cfg), startHelper(t, cfg)
			require.Equal(t, "ready", a.next(t, "ready"))
			require.Equal(t, "ready", b.next(t, "ready"))
			for time.Now().Before(first.Token.Expiry) {
				time.Sleep(20 * time.Millisecond) // until the stored token has expired (1 s)
			}
			_, errA := io.WriteString(a.stdin, "go\n")
			_, errB := io.WriteString(b.stdin, "go\n")
			require.NoError(t, errA)
			require.NoError(t, errB)
			var ra, rb struct {
				Token     string
				Refreshes int
				Error     string
			}
			require.NoError(t, json.Unmarshal([]byte(a.next(t, "its token")), &ra))
			require.NoError(t, json.Unmarshal([]byte(b.next(t, "its token")), &rb))
			require.Empty(t, ra.Error)
			require.Empty(t, rb.Error)

			refreshes := 0
			for _, f := range as.TokenRequests() {
				if len(f["grant_type"]) > 0 && f["grant_type"][0] == "refresh_token" {
					refreshes++
				}
			}
			assert.Equal(t, 1, refreshes, "one refresh between the two processes")
			assert.Equal(t, 1, ra.Refreshes+rb.Refreshes, "one process refreshed, the other adopted its token")
			assert.Zero(t, as.Reuse(), "no refresh token was presented twice")
			assert.Equal(t, ra.Token, rb.Token, "both processes use the refreshed token")
			assert.NotEqual(t, first.Token.AccessToken, ra.Token)
			now, err := st.Load(ctx(t), first.ServerURL, first.Issuer)
			require.NoError(t, err)
			assert.Equal(t, ra.Token, now.Token.AccessToken, "the store holds the refreshed token")
			assert.NotEqual(t, first.Token.RefreshToken, now.Token.RefreshToken, "the rotated refresh token was persisted")
		})
	}
}

// auto prefers the Secret Service where it answers, and says why it
// fell back to the file where it does not; names it does not know are
// errors, and keyctl asked for explicitly is used.
func TestAutoChoosesAndSaysWhich(t *testing.T) {
	file := filepath.Join(t.TempDir(), "oauth-tokens.json")
	_, info, err := Open(ctx(t), Options{File: file, DBusAddress: "unix:path=" + filepath.Join(t.TempDir(), "no-bus")})
	require.NoError(t, err)
	assert.Equal(t, BackendFile, info.Backend)
	assert.Equal(t, file, info.Where)
	assert.Contains(t, info.Fallback, "secret-service")
	assert.Contains(t, info.String(), "no OS store")

	_, _, err = Open(ctx(t), Options{File: file, Backend: BackendSecretService, DBusAddress: "unix:path=" + filepath.Join(t.TempDir(), "no-bus")})
	assert.ErrorIs(t, err, ErrUnavailable, "an explicit backend that cannot work is an error, not a silent file")
	_, _, err = Open(ctx(t), Options{File: file, Backend: "vault"})
	assert.ErrorIs(t, err, ErrUnknownBackend)
	_, _, err = Open(ctx(t), Options{File: file, Backend: BackendKeychain})
	assert.ErrorIs(t, err, ErrUnavailable, "the macOS keychain is not on Linux")
	_, _, err = Open(ctx(t), Options{File: file, Service: "bad name"})
	assert.Error(t, err)

	ks := startKeyring(t)
	st, info, err := Open(ctx(t), Options{File: file, DBusAddress: ks.address, Service: "mcpvisor-auto-test"})
	require.NoError(t, err)
	assert.Equal(t, BackendSecretService, info.Backend, info.String())
	assert.Contains(t, info.Where, "collection")
	assert.IsType(t, &Store{}, st)
}
