// Package search is the benchmark for tool search: tool sets captured from
// real MCP servers (testdata/*.json, written by ./capture), queries written
// the way a model and a user ask for a tool (testdata/queries.json), the
// Ranker interface a search implementation is measured through, the metrics
// (recall@1, @5, @10, MRR) and the baseline every other ranker is compared
// with: plain BM25 over a tool's name and description.
//
// Run the report with
//
//	go test ./bench/search -run TestReport -v
//
// and the latency benchmark with
//
//	go test ./bench/search -run '^$' -bench BenchmarkSearch
package search

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// ErrCorpus reports a testdata file that cannot be used (unreadable, not
// JSON, a server without a name or tools, a duplicate server or tool).
var ErrCorpus = errors.New("search: bad corpus")

// Server is one captured server: its configured name, the npm package and
// version it was captured from, what it said in initialize, and its tools as
// tools/list returned them.
type Server struct {
	Name         string          `json:"name"`
	Package      string          `json:"package"`
	ServerInfo   ServerInfo      `json:"serverInfo"`
	Instructions string          `json:"instructions,omitempty"`
	Tools        []protocol.Tool `json:"tools"`
}

// ServerInfo is the serverInfo of an initialize result.
type ServerInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// ID is the identifier rankers return for a tool: "server/tool".
func ID(server, tool string) string { return server + "/" + tool }

// LoadCorpus reads every captured server in dir (every *.json file but
// queries.json), sorted by name. It fails with ErrCorpus when a file is not
// a valid capture or two servers share a name.
func LoadCorpus(dir string) ([]Server, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Server
	seen := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == "queries.json" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorpus, err)
		}
		var s Server
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorpus, filepath.Base(f), err)
		}
		if s.Name == "" || len(s.Tools) == 0 {
			return nil, fmt.Errorf("%w: %s: no name or no tools", ErrCorpus, filepath.Base(f))
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: server %q twice", ErrCorpus, s.Name)
		}
		seen[s.Name] = true
		names := map[string]bool{}
		for _, t := range s.Tools {
			if t.Name == "" || names[t.Name] {
				return nil, fmt.Errorf("%w: server %q: empty or duplicate tool name %q", ErrCorpus, s.Name, t.Name)
			}
			names[t.Name] = true
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ToolCount is the number of tools over all servers.
func ToolCount(servers []Server) int {
	n := 0
	for _, s := range servers {
		n += len(s.Tools)
	}
	return n
}

// Replicate returns copies of servers under renamed servers ("<name>-<i>")
// until at least n tools are reached, for latency at a size larger than the
// corpus. Tool definitions are shared, not copied.
func Replicate(servers []Server, n int) []Server {
	var out []Server
	total := 0
	for i := 0; total < n; i++ {
		for _, s := range servers {
			c := s
			if i > 0 {
				c.Name = fmt.Sprintf("%s-%d", s.Name, i)
			}
			out = append(out, c)
			total += len(s.Tools)
			if total >= n {
				break
			}
		}
	}
	return out
}

// Query is one benchmark query: the text a caller would send to a search
// tool and the tools ("server/tool") that would answer it, any one of which
// counts as found.
type Query struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	Want []string `json:"want"`
	// Kind is "model" (phrased the way a model asks a search tool) or
	// "user" (the way a person asks for something).
	Kind string `json:"kind"`
	// Split is "tune" (a ranker may be tuned on it) or "heldout" (never
	// looked at while tuning).
	Split string `json:"split"`
	// NoOverlap claims the text shares no content word with the wanted
	// tools' names and descriptions (checked by a test).
	NoOverlap bool `json:"noOverlap,omitempty"`
}

// LoadQueries reads testdata/queries.json.
func LoadQueries(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qs []Query
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorpus, filepath.Base(path), err)
	}
	return qs, nil
}

// SplitFor is the split a query id belongs to: "heldout" for about a third
// of ids (FNV-1a of the id modulo 3 == 0), "tune" for the rest. Fixed so that
// nobody chooses which queries are held out.
func SplitFor(id string) string {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	if h%3 == 0 {
		return "heldout"
	}
	return "tune"
}

// Words splits text into lowercased runs of letters and digits (the
// baseline's tokenizer, also used to check noOverlap).
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
