package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// maxLine bounds one stdio frame.
const maxLine = 16 << 20

// ServeStdio serves one downstream client over newline-delimited JSON-RPC
// on r (its stdin) and w (its stdout) until r ends or ctx does. Requests
// are served concurrently; every frame is written whole, one at a time.
// When it returns, the session's requests are cancelled and answered.
func (g *Gateway) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	var wmu sync.Mutex
	write := func(frame []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = w.Write(append(frame, '\n'))
	}
	s := newSession(g, "", write)
	key := "stdio:" + newSessionID()
	g.mu.Lock()
	g.sessions[key] = s
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		g.mu.Lock()
		delete(g.sessions, key)
		g.mu.Unlock()
		wg.Wait()
		s.close()
	}()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := readLine(br)
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case line := <-lines:
			m, err := protocol.Decode(line)
			if err != nil {
				code := int64(protocol.CodeParseError)
				if errors.Is(err, protocol.ErrBatch) || errors.Is(err, protocol.ErrInvalidMessage) {
					code = protocol.CodeInvalidRequest
				}
				write(reply(protocol.ID{}, nil, errorf(code, "%v", err)))
				continue
			}
			if m.Kind != protocol.KindRequest {
				s.handle(ctx, m, nil) // notifications are quick: in order
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if frame, _ := s.handle(ctx, m, write); frame != nil {
					write(frame)
				}
			}()
		}
	}
}

// readLine reads one line without its newline, at most maxLine bytes (a
// longer line is discarded and reported as an empty line).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !over && len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		} else {
			line, over = nil, true
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}
