package inproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers every line with itself until its input ends.
var echo = ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if _, err := fmt.Fprintf(w, "%s\n", sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
})

func dial(t *testing.T, srv Server, opts Options) (*Conn, *transporttest.Recorder) {
	t.Helper()
	rec := transporttest.NewRecorder()
	c, err := Dial(testwait.Context(t), srv, opts, rec)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c, rec
}

func TestFramesRoundTrip(t *testing.T) {
	c, rec := dial(t, echo, Options{})
	ctx := testwait.Context(t)
	for i := range 3 {
		require.NoError(t, c.Send(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)))
	}
	frames, _ := rec.Wait(t, 3)
	assert.Equal(t, []string{
		`{"jsonrpc":"2.0","id":0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
	}, frames)

	require.NoError(t, c.Close(ctx))
	err := rec.WaitClosed(t)
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Equal(t, transports.ClassClosed, transports.Classify(err))
}

func TestConcurrentSendsNeverInterleave(t *testing.T) {
	c, rec := dial(t, echo, Options{})
	transporttest.SendsDoNotInterleave(t, c, rec, 16, 40, 100)
}

func TestOversizeLinesAreDroppedAndReportedNotFatal(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":7,"result":"` + strings.Repeat("y", 10000) + `"}`
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		fmt.Fprintf(w, "%s\n{\"ok\":1}\n", big)
		<-ctx.Done()
		return nil
	})
	_, rec := dial(t, srv, Options{MaxFrameSize: 5000, CloseTimeout: time.Millisecond})
	frames, errs := rec.Wait(t, 2)
	assert.Equal(t, []string{`{"ok":1}`}, frames, "the connection goes on")
	require.Len(t, errs, 1)
	var tl *transports.FrameTooLargeError
	require.ErrorAs(t, errs[0], &tl)
	assert.EqualValues(t, 5000, tl.Limit)
	assert.EqualValues(t, len(big), tl.Size)
	assert.Equal(t, big[:4096], string(tl.Prefix))
}

func TestATrailingOversizeLineIsReportedWhenTheOutputEnds(t *testing.T) {
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		fmt.Fprint(w, strings.Repeat("z", 100))
		return nil
	})
	_, rec := dial(t, srv, Options{MaxFrameSize: 10})
	err := rec.WaitClosed(t)
	var exit *ExitError
	require.ErrorAs(t, err, &exit)
	frames, errs := rec.Wait(t, 1)
	assert.Empty(t, frames)
	var tl *transports.FrameTooLargeError
	require.ErrorAs(t, errs[0], &tl)
	assert.EqualValues(t, 100, tl.Size)
}

func TestBlankLinesCRLFAndAMissingFinalNewlineAreTolerated(t *testing.T) {
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		io.WriteString(w, "\n \r\n{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":3}")
		return nil
	})
	_, rec := dial(t, srv, Options{})
	require.Error(t, rec.WaitClosed(t))
	frames, errs := rec.Wait(t, 3)
	assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, frames)
	assert.Empty(t, errs)
}

func TestServeMCPReturningEndsTheConnection(t *testing.T) {
	boom := errors.New("boom")
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		io.WriteString(w, "{\"last\":true}\n")
		return boom
	})
	c, rec := dial(t, srv, Options{})
	err := rec.WaitClosed(t)
	frames, _ := rec.Wait(t, 1)
	assert.Equal(t, []string{`{"last":true}`}, frames, "output written before returning is delivered")

	var exit *ExitError
	require.ErrorAs(t, err, &exit)
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Equal(t, transports.ClassClosed, transports.Classify(err))

	err = c.Send(testwait.Context(t), []byte(`{}`))
	assert.ErrorIs(t, err, transports.ErrClosed, "a send after the server returned fails")
	assert.NoError(t, c.Close(testwait.Context(t)))
}

func TestServeMCPReturningNilIsAClosedConnection(t *testing.T) {
	_, rec := dial(t, ServerFunc(func(context.Context, io.Reader, io.Writer) error { return nil }), Options{})
	err := rec.WaitClosed(t)
	var exit *ExitError
	require.ErrorAs(t, err, &exit)
	assert.NoError(t, exit.Err)
	assert.Equal(t, transports.ClassClosed, transports.Classify(err))
}

func TestAPanicInServeMCPIsRecoveredAndReported(t *testing.T) {
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		panic("kaboom")
	})
	_, rec := dial(t, srv, Options{})
	err := rec.WaitClosed(t)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "kaboom", pe.Value)
	assert.Contains(t, string(pe.Stack), "inproc_test.go", "the stack shows where")
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Contains(t, err.Error(), "kaboom")

	wrapped := errors.New("inner")
	_, rec = dial(t, ServerFunc(func(context.Context, io.Reader, io.Writer) error { panic(wrapped) }), Options{})
	assert.ErrorIs(t, rec.WaitClosed(t), wrapped, "a panic with an error unwraps to it")
}

func TestCloseEndsTheServersInput(t *testing.T) {
	var sawEOF bool
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		_, err := io.Copy(io.Discard, r)
		sawEOF = err == nil // io.Copy turns EOF into nil
		return err
	})
	c, rec := dial(t, srv, Options{CloseTimeout: 10 * time.Second})
	start := time.Now()
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.Less(t, time.Since(start), 5*time.Second, "no timeout was needed")
	assert.True(t, sawEOF)
	err := rec.WaitClosed(t)
	assert.Equal(t, transports.ErrClosed, err, "a connection closed by Close reports ErrClosed")
}

func TestCloseCancelsAServerThatIgnoresItsInputEnding(t *testing.T) {
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		<-ctx.Done()
		return ctx.Err()
	})
	c, rec := dial(t, srv, Options{CloseTimeout: 50 * time.Millisecond})
	start := time.Now()
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the server had CloseTimeout to return by itself")
	assert.Equal(t, transports.ErrClosed, rec.WaitClosed(t))
}

func TestCloseReportsAServerThatWillNotStop(t *testing.T) {
	release := make(chan struct{})
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		<-release // testwait:ok the server's goroutine; released below
		_, err := io.WriteString(w, "{\"too\":\"late\"}\n")
		return err
	})
	c, rec := dial(t, srv, Options{CloseTimeout: 20 * time.Millisecond})
	err := c.Close(testwait.Context(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "leaked")
	assert.Equal(t, transports.ErrClosed, rec.WaitClosed(t), "Closed is reported all the same")
	assert.Equal(t, err, c.Close(testwait.Context(t)), "a later Close gives the same answer")

	close(release) // the test's goroutine check needs the server gone
	select {
	case <-c.served:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not return")
	}
	frames, _ := rec.Wait(t, 0)
	assert.Empty(t, frames, "output after Close gave up is not delivered")
}

func TestCloseIsBoundedByItsContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		<-release // testwait:ok the server's goroutine; released when the test returns
		return nil
	})
	c, rec := dial(t, srv, Options{CloseTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Close(ctx)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "leaks")
	rec.WaitClosed(t)
}

func TestCloseIsIdempotentAndSafeConcurrently(t *testing.T) {
	c, rec := dial(t, echo, Options{})
	transporttest.CloseIsSafeConcurrently(t, c, rec, 20)
}

func TestSendHonoursItsContextWhileTheServerDoesNotRead(t *testing.T) {
	startReading := make(chan struct{})
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		select {
		case <-startReading:
		case <-ctx.Done():
			return ctx.Err()
		}
		return echo(ctx, r, w)
	})
	c, rec := dial(t, srv, Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, []byte(`{"first":1}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, transports.ErrClosed, "nothing was written: the connection is intact")

	// A second sender gives up while waiting for its turn, too.
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	assert.ErrorIs(t, c.Send(cancelled, []byte(`{}`)), context.Canceled)

	close(startReading)
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"second":2}`)))
	frames, _ := rec.Wait(t, 1)
	assert.Equal(t, []string{`{"second":2}`}, frames, "the withdrawn frame never reached the server")
}

func TestASendCutMidFrameEndsTheConnection(t *testing.T) {
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		io.ReadFull(r, make([]byte, 5)) // then stop reading
		<-ctx.Done()                    // which Send's giving up cancels
		return ctx.Err()
	})
	c, rec := dial(t, srv, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	require.ErrorIs(t, err, transports.ErrClosed)
	assert.Contains(t, err.Error(), "read 5 of")

	cause := rec.WaitClosed(t)
	assert.ErrorIs(t, cause, transports.ErrClosed)
	assert.Contains(t, cause.Error(), "cut")
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed, "the connection stays ended")
}

func TestSendAfterCloseFails(t *testing.T) {
	c, _ := dial(t, echo, Options{})
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
}

func TestAServerClosingItsInputMakesSendsFail(t *testing.T) {
	closed := make(chan struct{})
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		r.(io.Closer).Close()
		close(closed)
		<-ctx.Done()
		return nil
	})
	c, _ := dial(t, srv, Options{CloseTimeout: time.Millisecond})
	testwait.Done(t, closed, "the server to close its input")
	err := c.Send(testwait.Context(t), []byte(`{}`))
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Contains(t, err.Error(), "closed its input")
}

func TestAServerClosingItsOutputEndsTheConnection(t *testing.T) {
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		w.(io.Closer).Close()
		<-ctx.Done() // but it does not return
		return nil
	})
	c, rec := dial(t, srv, Options{CloseTimeout: time.Millisecond})
	err := rec.WaitClosed(t)
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Contains(t, err.Error(), "closed its output")
	assert.NoError(t, c.Close(testwait.Context(t)), "Close still stops the server")
}

func TestTheServersContextCarriesDialsValuesButNotItsCancellation(t *testing.T) {
	type key struct{}
	got := make(chan any, 1)
	srv := ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		got <- ctx.Value(key{})
		return echo(ctx, r, w)
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	rec := transporttest.NewRecorder()
	c, err := Dial(ctx, srv, Options{}, rec)
	require.NoError(t, err)
	defer c.Close(testwait.Context(t))
	cancel()
	assert.Equal(t, "v", testwait.Recv(t, got, "the server's context value"))
	require.NoError(t, c.Send(testwait.Context(t), []byte(`{"still":"up"}`)))
	rec.Wait(t, 1)
}

func TestDialRefusesADoneContextAndANilServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Dial(ctx, echo, Options{}, transporttest.NewRecorder())
	assert.ErrorIs(t, err, context.Canceled)

	_, err = Dial(testwait.Context(t), nil, Options{}, transporttest.NewRecorder())
	var cfgErr *transports.ConfigError
	assert.ErrorAs(t, err, &cfgErr)
}
