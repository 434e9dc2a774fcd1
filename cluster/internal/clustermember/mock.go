package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

// serveMock runs the mock instead of a member (-serve-mock): the
// project's mock MCP server over Streamable HTTP on a free loopback port,
// serving every virtual server as <url>/<name>. It prints its URL as a
// JSON line ({"type":"mock","url":…}) and serves until its stdin closes
// (the test that started it ended) or it is killed. A test runs the mock
// here rather than in its own process so that thousands of sessions are
// not served by a binary built with -race.
func serveMock(print func(any)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mock, err := mockserver.Serve(ctx, mockserver.Options{Transport: mockserver.TransportHTTP, Listen: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	print(map[string]any{"type": "mock", "url": mock.URL, "time": time.Now()})
	_, _ = io.Copy(io.Discard, os.Stdin)
	mock.Close()
}
