// Command mockserver runs mcpvisor's mock MCP server (bench/mockserver)
// over stdio, so that every client benchmarked in bench/peers talks to the
// same standalone binary. Flags are mockserver.ParseFlags'.
package main

import (
	"os"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

func main() { os.Exit(mockserver.Main(os.Args[1:])) }
