package toolsearch

import (
	"encoding/json"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// fixture tools, written the way real servers list theirs (names,
// descriptions and schemas modelled on the filesystem, GitHub, Slack,
// browser, time and shell servers).
type fixtureServer struct {
	srv   Server
	tools []protocol.Tool
}

func tool(name, title, desc, schema string, readOnly bool) protocol.Tool {
	t := protocol.Tool{Name: name, Title: title, Description: desc, InputSchema: json.RawMessage(schema)}
	if readOnly {
		ro := true
		t.Annotations = &protocol.ToolAnnotations{ReadOnlyHint: &ro}
	}
	return t
}

var fixtures = []fixtureServer{
	{Server{Name: "filesystem", Title: "Secure Filesystem", Instructions: "Read and write files under the allowed roots only."}, []protocol.Tool{
		tool("read_text_file", "Read Text File", "Read the complete contents of a file from the file system as text.", `{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"number","description":"If provided, returns only the first N lines of the file"}},"required":["path"]}`, true),
		tool("write_file", "Write File", "Create a new file or completely overwrite an existing file with new content.", `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`, false),
		tool("list_directory", "List Directory", "Get a detailed listing of all files and directories in a specified path.", `{"type":"object","properties":{"path":{"type":"string"}}}`, true),
		tool("move_file", "Move File", "Move or rename files and directories.", `{"type":"object","properties":{"source":{"type":"string"},"destination":{"type":"string"}}}`, false),
		tool("get_file_info", "Get File Info", "Retrieve detailed metadata about a file or directory: size, creation time, last modified time, permissions.", `{"type":"object","properties":{"path":{"type":"string"}}}`, true),
		tool("search_files", "Search Files", "Recursively search for files and directories matching a pattern.", `{"type":"object","properties":{"path":{"type":"string"},"pattern":{"type":"string"},"excludePatterns":{"type":"array","items":{"type":"string"}}}}`, true),
	}},
	{Server{Name: "github", Title: "GitHub"}, []protocol.Tool{
		tool("create_issue", "", "Create a new issue in a GitHub repository.", `{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner"},"repo":{"type":"string","description":"Repository name"},"title":{"type":"string","description":"Issue title"},"body":{"type":"string","description":"Issue body content"},"labels":{"type":"array","items":{"type":"string"}}}}`, false),
		tool("list_pull_requests", "", "List and filter repository pull requests.", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"state":{"type":"string","enum":["open","closed","all"]}}}`, true),
		tool("search_repositories", "", "Search for GitHub repositories.", `{"type":"object","properties":{"query":{"type":"string","description":"Search query (see GitHub search syntax)"}}}`, true),
		tool("get_file_contents", "", "Get the contents of a file or directory from a GitHub repository.", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"path":{"type":"string"},"branch":{"type":"string"}}}`, true),
		tool("add_issue_comment", "", "Add a comment to an existing issue.", `{"type":"object","properties":{"issue_number":{"type":"number"},"body":{"type":"string","description":"Comment text"}}}`, false),
	}},
	{Server{Name: "slack", Title: "Slack"}, []protocol.Tool{
		tool("slack_post_message", "", "Post a new message to a Slack channel.", `{"type":"object","properties":{"channel_id":{"type":"string","description":"The ID of the channel to post to"},"text":{"type":"string","description":"The message text to post"}}}`, false),
		tool("slack_list_channels", "", "List public or pre-defined channels in the workspace with pagination.", `{"type":"object","properties":{"limit":{"type":"number"},"cursor":{"type":"string"}}}`, true),
		tool("slack_get_user_profile", "", "Get detailed profile information for a specific user.", `{"type":"object","properties":{"user_id":{"type":"string"}}}`, true),
	}},
	{Server{Name: "playwright", Title: "Playwright", Instructions: "Browser automation: drive a real browser, read pages through accessibility snapshots."}, []protocol.Tool{
		tool("browser_navigate", "Navigate to a URL", "Navigate to a URL.", `{"type":"object","properties":{"url":{"type":"string","description":"The URL to navigate to"}}}`, false),
		tool("browser_take_screenshot", "Take a screenshot", "Take a screenshot of the current page. You can't perform actions based on the screenshot, use browser_snapshot for actions.", `{"type":"object","properties":{"type":{"type":"string","enum":["png","jpeg"]},"fullPage":{"type":"boolean","description":"When true, takes a screenshot of the full scrollable page"}}}`, true),
		tool("browser_click", "Click", "Perform click on a web page.", `{"type":"object","properties":{"element":{"type":"string","description":"Human-readable element description"},"ref":{"type":"string"}}}`, false),
	}},
	{Server{Name: "time"}, []protocol.Tool{
		tool("get_current_time", "", "Get current time in a specific timezones.", `{"type":"object","properties":{"timezone":{"type":"string","description":"IANA timezone name (e.g., 'America/New_York')"}}}`, true),
		tool("convert_time", "", "Convert time between timezones.", `{"type":"object","properties":{"source_timezone":{"type":"string"},"time":{"type":"string","description":"Time to convert in 24-hour format (HH:MM)"},"target_timezone":{"type":"string"}}}`, true),
	}},
	{Server{Name: "desktop-commander"}, []protocol.Tool{
		tool("startProcess", "", "Start a new terminal process with intelligent state detection.", `{"type":"object","properties":{"command":{"type":"string"},"timeout_ms":{"type":"number"}}}`, false),
		tool("getUserProfile", "", "Returns the profile of the signed-in person.", `{"type":"object"}`, true),
	}},
}

// qualified is the pool's name for a server's tool.
func qualified(server, name string) string { return "mcp__" + server + "__" + name }

func entries(fs fixtureServer) []Entry {
	out := make([]Entry, len(fs.tools))
	for i, t := range fs.tools {
		out[i] = Entry{Name: qualified(fs.srv.Name, t.Name), Tool: t}
	}
	return out
}

// fixtureIndex is an index of every fixture server.
func fixtureIndex(o Options) *Index {
	ix := New(o)
	for _, fs := range fixtures {
		ix.SetServer(fs.srv, entries(fs))
	}
	return ix
}

// indexedServer is a server and its entries.
type indexedServer struct {
	srv     Server
	entries []Entry
}

// replicated is a corpus of n tools: the fixtures repeated under
// numbered server names (for latency, not for ranking quality).
func replicated(n int) []indexedServer {
	var servers []indexedServer
	count := 0
	for i := 0; count < n; i++ {
		fs := fixtures[i%len(fixtures)]
		srv := fs.srv
		srv.Name = fmt.Sprintf("%s%d", fs.srv.Name, i)
		var es []Entry
		for _, t := range fs.tools {
			if count == n {
				break
			}
			es = append(es, Entry{Name: qualified(srv.Name, t.Name), Tool: t})
			count++
		}
		servers = append(servers, indexedServer{srv, es})
	}
	return servers
}
