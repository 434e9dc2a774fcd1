package testwait_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

func TestRecvAndDone(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := testwait.Recv(t, ch, "the seven"); got != 7 {
		t.Fatalf("Recv returned %d", got)
	}
	done := make(chan struct{})
	close(done)
	testwait.Done(t, done, "a closed channel")
	if got := testwait.Result(t, "a result", func() string { return "r" }); got != "r" {
		t.Fatalf("Result returned %q", got)
	}
	ran := false
	testwait.CallWithin(t, time.Second, "a call", func() { ran = true })
	if !ran {
		t.Fatal("CallWithin returned before its function ran")
	}
}

func TestLineReaderReadsLinesEventsAndTheRest(t *testing.T) {
	r, w := io.Pipe()
	lr := testwait.NewLineReader(t, r)
	go func() {
		io.WriteString(w, ": comment\n\nid: 4\nevent: message\ndata: {\"a\":1}\ndata: more\n\nplain\r\nlast line\nunterminated")
		w.CloseWithError(io.EOF)
	}()
	ev := lr.Event("the first event")
	if ev.ID != "4" || ev.Type != "message" || ev.Data != "{\"a\":1}\nmore" {
		t.Fatalf("event %+v", ev)
	}
	if s := lr.MustLine("the plain line"); s != "plain" {
		t.Fatalf("line %q (its CRLF must go)", s)
	}
	rest, err := lr.Rest("the rest")
	if err != nil || rest != "last line\nunterminated" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	if _, err := lr.Line("past the end"); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v, want EOF", err)
	}
}

// Each helper, when what it waits for does not come, fails the test with
// what it waited for. The failing waits run in a child process (this test
// binary again), whose output is checked.
func TestATimeoutSaysWhatItWaitedFor(t *testing.T) {
	if name := os.Getenv("TESTWAIT_FAIL"); name != "" {
		failingWait(t, name)
		return
	}
	for _, tc := range []struct{ name, want string }{
		{"recv", "testwait: waited 50ms for the answer that never comes"},
		{"closed", "testwait: the channel closed while waiting for the value of a closed channel"},
		{"line", "testwait: waited 50ms for a line: the silent server's greeting"},
		{"event", "testwait: waited 50ms for an event: a notification"},
		{"call", "testwait: waited 50ms for a stuck call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestATimeoutSaysWhatItWaitedFor$", "-test.count=1")
			cmd.Env = append(os.Environ(), "TESTWAIT_FAIL="+tc.name)
			cmd.WaitDelay = time.Second
			out := testwait.Result(t, "the child test", func() []byte { b, _ := cmd.CombinedOutput(); return b })
			if cmd.ProcessState == nil || cmd.ProcessState.Success() || !strings.Contains(string(out), tc.want) {
				t.Fatalf("the child test should fail saying %q; it said:\n%s", tc.want, out)
			}
		})
	}
}

// failingWait is a wait that cannot end, run by the child process.
func failingWait(t *testing.T, name string) {
	const d = 50 * time.Millisecond
	switch name {
	case "recv":
		testwait.RecvWithin(t, make(chan int), d, "the answer that never comes")
	case "closed":
		ch := make(chan int)
		close(ch)
		testwait.Recv(t, ch, "the value of a closed channel")
	case "line":
		r, _ := io.Pipe()
		testwait.NewLineReader(t, r).LineWithin(d, "the silent server's greeting")
	case "event":
		r, w := io.Pipe()
		go io.WriteString(w, ": just a comment\n\n")
		testwait.NewLineReader(t, r).EventWithin(d, "a notification")
	case "call":
		testwait.CallWithin(t, d, "a stuck call", func() { select {} })
	}
	t.Fatal("the wait returned")
}
