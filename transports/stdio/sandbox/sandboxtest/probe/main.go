// Command probe is the sandbox tests' stdio MCP server (see package
// sandboxtest).
package main

import (
	"os"

	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
)

func main() { os.Exit(sandboxtest.Main(os.Args[1:])) }
