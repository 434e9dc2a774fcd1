package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The floor: the round trip of a tools/call with the MCP layer removed.
// Its clients send the same request line a client of the mock would (a
// tools/call of echo with EchoText) to cmd/echo, which answers with the
// request itself or, with -payload, with as many bytes as the mock's
// answer. They do what any client must and nothing more: number the
// request, write it, read the answer and match it to its caller.

// EchoURLPrefix starts the line cmd/echo -mode http writes on stderr.
const EchoURLPrefix = "ECHO_URL="

func floorRequest(dst []byte, id int64) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	return append(dst, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+EchoText+`"}}}`...)
}

// floorAnswerLen is the length of cmd/echo's answer (without newline) to
// the request with id.
func floorAnswerLen(id int64, payload int) int {
	idLen := len(strconv.FormatInt(id, 10))
	if payload <= 0 {
		return len(floorRequest(nil, 0)) - 1 + idLen
	}
	return len(`{"jsonrpc":"2.0","id":`) + idLen + len(`,"result":{"text":"`) + payload + len(`"}}`)
}

// PipeEcho is a floor client over a pipe: cmd/echo -mode pipe as a child
// process, one writer at a time, one reader goroutine handing each
// answer to its caller.
type PipeEcho struct {
	payload int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	nextID  atomic.Int64
	wmu     sync.Mutex // serializes writes to stdin

	mu      sync.Mutex
	pending map[int64]chan []byte // guarded by mu
	err     error                 // guarded by mu; set when the reader ends
	done    chan struct{}         // closed when the reader has ended
}

// StartPipeEcho spawns echoBin in pipe mode.
func StartPipeEcho(echoBin string, payload int) (*PipeEcho, error) {
	p := &PipeEcho{payload: payload, pending: map[int64]chan []byte{}, done: make(chan struct{})}
	p.cmd = exec.Command(echoBin, "-mode", "pipe", "-payload", strconv.Itoa(payload))
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go p.read(stdout)
	return p, nil
}

func (p *PipeEcho) read(r io.Reader) {
	defer close(p.done)
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Keep the start before the next read overwrites it.
			head := bytes.Clone(line)
			var rest []byte
			rest, err = br.ReadBytes('\n')
			line = append(head, rest...)
		} else if err == nil {
			line = bytes.Clone(line)
		}
		if err != nil {
			break
		}
		id, ok := answerID(line)
		p.mu.Lock()
		ch := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if ok && ch != nil {
			ch <- line
		}
	}
	p.mu.Lock()
	p.err = fmt.Errorf("echo pipe ended: %w", err)
	for id, ch := range p.pending {
		close(ch)
		delete(p.pending, id)
	}
	p.mu.Unlock()
}

// answerID reads the "id" member at the start of an answer.
func answerID(line []byte) (int64, bool) {
	i := bytes.Index(line, []byte(`"id":`))
	if i < 0 {
		return 0, false
	}
	v := line[i+5:]
	end := bytes.IndexAny(v, ",}")
	if end < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(string(bytes.TrimSpace(v[:end])), 10, 64)
	return id, err == nil
}

// Echo sends one request and waits for its answer.
func (p *PipeEcho) Echo(ctx context.Context) (string, error) {
	id := p.nextID.Add(1)
	ch := make(chan []byte, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return "", p.err
	}
	p.pending[id] = ch
	p.mu.Unlock()
	req := append(floorRequest(make([]byte, 0, 128), id), '\n')
	p.wmu.Lock()
	_, err := p.stdin.Write(req)
	p.wmu.Unlock()
	if err != nil {
		return "", err
	}
	select {
	case ans, ok := <-ch:
		if !ok {
			return "", errors.New("echo pipe ended")
		}
		if n := len(bytes.TrimRight(ans, "\r\n")); n != floorAnswerLen(id, p.payload) {
			return "", fmt.Errorf("echo answer of %d bytes, want %d", n, floorAnswerLen(id, p.payload))
		}
		return EchoText, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return "", ctx.Err()
	}
}

// Version is not negotiated.
func (p *PipeEcho) Version() string { return "" }

// Close ends the child's stdin and waits for it to exit.
func (p *PipeEcho) Close() error {
	p.stdin.Close()
	t := time.AfterFunc(5*time.Second, func() { _ = p.cmd.Process.Kill() })
	defer t.Stop()
	err := p.cmd.Wait()
	<-p.done
	return err
}

// HTTPEcho is a floor client over loopback HTTP: a net/http client POSTing
// to cmd/echo -mode http, with a pool of keep-alive connections as the
// peers get (NewPooledHTTPClient).
type HTTPEcho struct {
	url     string
	payload int
	client  *http.Client
	nextID  atomic.Int64
}

// NewHTTPEcho returns a client of the echo server at url.
func NewHTTPEcho(url string, payload int) *HTTPEcho {
	return &HTTPEcho{url: url, payload: payload, client: NewPooledHTTPClient()}
}

// Echo POSTs one request and reads its answer.
func (h *HTTPEcho) Echo(ctx context.Context) (string, error) {
	id := h.nextID.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(floorRequest(make([]byte, 0, 128), id)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("echo server: %s", resp.Status)
	}
	if len(body) != floorAnswerLen(id, h.payload) {
		return "", fmt.Errorf("echo answer of %d bytes, want %d", len(body), floorAnswerLen(id, h.payload))
	}
	return EchoText, nil
}

// Version is not negotiated.
func (h *HTTPEcho) Version() string { return "" }

// Close closes the idle connections.
func (h *HTTPEcho) Close() error {
	h.client.CloseIdleConnections()
	return nil
}
