// Command echo is the floor of the call benchmarks: the same round trip
// as a tools/call with the MCP layer removed.
//
//	echo -mode pipe [-payload N]   newline-delimited JSON on stdin and stdout
//	echo -mode http [-payload N]   a net/http server on a loopback port
//
// Without -payload every request is sent back as it came: the line (pipe)
// or the POST's body (http). With -payload N the answer is instead
// {"jsonrpc":"2.0","id":<the request's id>,"result":{"text":"xxx…"}}
// with N x's, so that the floor moves as many bytes as the mock server's
// -payload answers.
//
// Over HTTP it prints one line ECHO_URL=http://127.0.0.1:<port>/ on
// stderr once it listens and serves until its stdin ends. Over the pipe
// it answers as soon as it has read a line, flushing once no more input
// is buffered, and exits at the end of stdin.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// URLPrefix starts the line the HTTP mode writes to stderr.
const URLPrefix = "ECHO_URL="

func main() {
	mode := flag.String("mode", "pipe", "pipe or http")
	payload := flag.Int("payload", 0, "answer with this many bytes of text instead of the request")
	flag.Parse()
	var err error
	switch *mode {
	case "pipe":
		err = pipe(os.Stdin, os.Stdout, *payload)
	case "http":
		err = serveHTTP(os.Stdin, *payload)
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

// answerer builds answers: the request itself, or a canned answer of
// payload bytes carrying the request's id.
type answerer struct {
	head, tail []byte // the canned answer around the id
}

func newAnswerer(payload int) *answerer {
	if payload <= 0 {
		return nil
	}
	return &answerer{
		head: []byte(`{"jsonrpc":"2.0","id":`),
		tail: []byte(`,"result":{"text":"` + strings.Repeat("x", payload) + `"}}`),
	}
}

// answer appends the answer to req (without its newline) to dst.
func (a *answerer) answer(dst, req []byte) []byte {
	if a == nil {
		return append(dst, req...)
	}
	dst = append(dst, a.head...)
	dst = append(dst, idOf(req)...)
	return append(dst, a.tail...)
}

// idOf returns the raw value of the request's "id" member (a number or a
// string without escapes), or null.
func idOf(req []byte) []byte {
	i := bytes.Index(req, []byte(`"id":`))
	if i < 0 {
		return []byte("null")
	}
	v := req[i+5:]
	end := bytes.IndexAny(v, ",}")
	if end < 0 {
		return []byte("null")
	}
	return bytes.TrimSpace(v[:end])
}

func pipe(r io.Reader, w io.Writer, payload int) error {
	a := newAnswerer(payload)
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Keep the start before the next read overwrites it.
			head := bytes.Clone(line)
			rest, err2 := br.ReadBytes('\n')
			line, err = append(head, rest...), err2
		}
		if req := bytes.TrimRight(line, "\r\n"); len(req) > 0 {
			out = append(a.answer(out[:0], req), '\n')
			if _, werr := bw.Write(out); werr != nil {
				return werr
			}
			if br.Buffered() == 0 {
				if werr := bw.Flush(); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}

func serveHTTP(stdin io.Reader, payload int) error {
	a := newAnswerer(payload)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			req, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			body := a.answer(nil, req)
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}),
	}
	fmt.Fprintf(os.Stderr, "%shttp://%s/\n", URLPrefix, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}()
	if err := <-done; err != http.ErrServerClosed {
		return err
	}
	return nil
}
