package stdiotest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SharedDir makes a directory that the user nobody can read, for what a
// test builds before RunUnprivileged (t.TempDir is the owner's alone).
func SharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcpvisor-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// EnvUnprivileged is set in a test run again by RunUnprivileged.
const EnvUnprivileged = "MCPVISOR_TEST_UNPRIVILEGED"

// Unprivileged reports whether this test binary was run by
// RunUnprivileged.
func Unprivileged() bool { return os.Getenv(EnvUnprivileged) != "" }

// RequireRoot skips a test that runs another as nobody when this one is
// not root: then the other already ran unprivileged (make test runs as
// root, and runs these packages again as nobody: make test-nobody).
func RequireRoot(t *testing.T) {
	t.Helper()
	switch {
	case Unprivileged():
		t.Skip("this run is the unprivileged one (make test-nobody)")
	case os.Getuid() != 0:
		t.Skip("runs a test as nobody, which needs root; this run is unprivileged already (uid " + strconv.Itoa(os.Getuid()) + ")")
	}
}

// RunUnprivileged runs the test named name again, in a copy of this test
// binary, as the user nobody: where the tests run as root (CI), this is
// how the unprivileged paths (no writable cgroup, bubblewrap through a
// user namespace) are exercised. env entries are added to the run's
// environment. It skips when not root, and fails with the run's output
// when the test fails there.
func RunUnprivileged(t *testing.T, name string, env ...string) {
	t.Helper()
	RequireRoot(t)
	dir, err := os.MkdirTemp("", "mcpvisor-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^"+name+"$", "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), EnvUnprivileged+"=1", "HOME="+dir, "TMPDIR=/tmp"), env...)
	cmd.SysProcAttr = asNobody(t)
	done := make(chan struct{})
	var out []byte
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s as nobody did not finish within 3 minutes:\n%s", name, out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
	t.Logf("%s as nobody:\n%s", name, out)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
