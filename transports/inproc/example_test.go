package inproc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/mcpvisor/mcpvisor/transports/inproc"
)

// printer is a Receiver that hands frames and the end to the example.
type printer struct {
	frames chan string
	closed chan error
}

func (p *printer) Frame(b []byte)       { p.frames <- string(b) }
func (p *printer) FrameError(err error) {}
func (p *printer) Closed(err error)     { p.closed <- err }

// A server is anything that reads newline-delimited JSON-RPC from r and
// writes newline-delimited JSON-RPC to w. With the official Go SDK:
//
//	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
//	server := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
//		return srv.Run(ctx, &mcp.IOTransport{Reader: r.(io.ReadCloser), Writer: w.(io.WriteCloser)})
//	})
//
// With mcp-go:
//
//	s := server.NewMCPServer("notes", "1.0.0")
//	srv := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
//		return server.NewStdioServer(s).Listen(ctx, r, w)
//	})
//
// Here, a hand-written server that answers every request with an empty
// result.
func Example() {
	server := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
				continue
			}
			fmt.Fprintf(w, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n", req.ID)
		}
		return sc.Err()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recv := &printer{frames: make(chan string, 1), closed: make(chan error, 1)}
	conn, err := inproc.Dial(ctx, server, inproc.Options{}, recv)
	if err != nil {
		fmt.Println(err)
		return
	}
	conn.Send(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	select {
	case frame := <-recv.frames:
		fmt.Println(frame)
	case <-ctx.Done():
		fmt.Println("no answer:", ctx.Err())
	}

	fmt.Println("close:", conn.Close(ctx))
	select {
	case err := <-recv.closed:
		fmt.Println("closed:", err)
	case <-ctx.Done():
		fmt.Println("not closed:", ctx.Err())
	}
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{}}
	// close: <nil>
	// closed: transport: connection closed
}
