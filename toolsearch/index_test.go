package toolsearch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// names are the hits' names, in order.
func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Name
	}
	return out
}

// rank is the 1-based position of name in hits, 0 when absent.
func rank(hits []Hit, name string) int {
	for i, h := range hits {
		if h.Name == name {
			return i + 1
		}
	}
	return 0
}

func TestSearchFindsToolsByTheWordsOfTheirNames(t *testing.T) {
	ix := fixtureIndex(Options{})
	for _, c := range []struct{ query, want string }{
		{"getUserProfile", qualified("desktop-commander", "getUserProfile")},
		{"get user profile", qualified("desktop-commander", "getUserProfile")},
		{"read_text_file", qualified("filesystem", "read_text_file")},
		{"readTextFile", qualified("filesystem", "read_text_file")},
		{"createIssue", qualified("github", "create_issue")},
		{"browser-navigate", qualified("playwright", "browser_navigate")},
		{"start process", qualified("desktop-commander", "startProcess")},
	} {
		hits := ix.Search(Query{Text: c.query, Limit: 3})
		if rank(hits, c.want) != 1 {
			t.Errorf("%q: hits %q, want %s first", c.query, names(hits), c.want)
		}
	}
}

func TestSearchFindsToolsThatShareNoWordWithTheQuery(t *testing.T) {
	ix := fixtureIndex(Options{})
	for _, c := range []struct{ query, want string }{
		// expansion: capture/picture → screenshot; folder → directory; ticket → issue
		{"capture what the browser shows", qualified("playwright", "browser_take_screenshot")},
		{"enumerate folder", qualified("filesystem", "list_directory")},
		{"report a bug", qualified("github", "create_issue")},
		{"chat channels", qualified("slack", "slack_list_channels")},
		// stemming: "listing directories" meets "list_directory"
		{"listing directories", qualified("filesystem", "list_directory")},
		{"timezone conversions", qualified("time", "convert_time")},
	} {
		hits := ix.Search(Query{Text: c.query, Limit: 5})
		if r := rank(hits, c.want); r == 0 || r > 3 {
			t.Errorf("%q: hits %q, want %s in the first 3", c.query, names(hits), c.want)
		}
	}
	// The same queries without expansion miss the expansion cases: the
	// finds above are expansion's doing.
	plain := fixtureIndex(Options{ExpansionWeight: -1})
	if hits := plain.Search(Query{Text: "enumerate folder"}); rank(hits, qualified("filesystem", "list_directory")) != 0 {
		t.Errorf("without expansion %q found %q", "enumerate folder", names(hits))
	}
}

func TestSearchFiltersByServerReadOnlyAndAllow(t *testing.T) {
	ix := fixtureIndex(Options{})
	hits := ix.Search(Query{Text: "file contents", Servers: []string{"github"}})
	if len(hits) == 0 {
		t.Fatal("no hit in github")
	}
	for _, h := range hits {
		if h.Server != "github" || !strings.HasPrefix(h.Name, "mcp__github__") {
			t.Errorf("server filter let %s (%s) through", h.Name, h.Server)
		}
	}

	hits = ix.Search(Query{Text: "write file", Limit: 50, ReadOnly: true})
	if len(hits) == 0 {
		t.Fatal("no read-only hit")
	}
	for _, h := range hits {
		if a := h.Tool.Annotations; a == nil || a.ReadOnlyHint == nil || !*a.ReadOnlyHint {
			t.Errorf("read-only filter let %s through", h.Name)
		}
	}

	denied := qualified("filesystem", "write_file")
	if r := rank(ix.Search(Query{Text: "write file"}), denied); r != 1 {
		t.Fatalf("write_file ranks %d without a filter, want 1", r)
	}
	var asked []string
	hits = ix.Search(Query{Text: "write file", Limit: 3, Allow: func(name string) bool {
		asked = append(asked, name)
		return name != denied
	}})
	if rank(hits, denied) != 0 || len(hits) != 3 {
		t.Errorf("Allow: hits %q, want 3 without %s", names(hits), denied)
	}
	if len(asked) != 4 {
		t.Errorf("Allow was asked %d times (%q), want 4: only candidates, best first, until 3 are allowed", len(asked), asked)
	}
}

func TestSetServerReplacesAndRemoveServerRemoves(t *testing.T) {
	ix := fixtureIndex(Options{})
	total := 0
	for _, fs := range fixtures {
		total += len(fs.tools)
	}
	if ix.Len() != total {
		t.Fatalf("Len = %d, want %d", ix.Len(), total)
	}
	gh := fixtures[1]
	ix.SetServer(gh.srv, []Entry{{Name: qualified("github", "merge_pull_request"),
		Tool: tool("merge_pull_request", "", "Merge a pull request.", `{"type":"object"}`, false)}})
	if ix.Len() != total-len(gh.tools)+1 {
		t.Fatalf("after replacing github's %d tools by one, Len = %d", len(gh.tools), ix.Len())
	}
	if hits := ix.Search(Query{Text: "create issue", Servers: []string{"github"}}); len(hits) != 0 {
		t.Errorf("replaced tools still found: %q", names(hits))
	}
	if hits := ix.Search(Query{Text: "merge"}); rank(hits, qualified("github", "merge_pull_request")) != 1 {
		t.Errorf("the new tool is not found: %q", names(hits))
	}
	ix.RemoveServer("github")
	ix.RemoveServer("no-such-server")
	if hits := ix.Search(Query{Text: "merge pull request issue repository", Limit: 100}); slices.ContainsFunc(hits, func(h Hit) bool { return h.Server == "github" }) {
		t.Errorf("removed server still found: %q", names(hits))
	}
	if ix.Len() != total-len(gh.tools) {
		t.Errorf("after RemoveServer, Len = %d, want %d", ix.Len(), total-len(gh.tools))
	}
}

func TestLearnRaisesTheCalledTool(t *testing.T) {
	ix := fixtureIndex(Options{})
	q := "file details"
	want := qualified("filesystem", "list_directory")
	before := rank(ix.Search(Query{Text: q}), want)
	if before == 1 {
		t.Fatalf("%s already first for %q; the test needs another tool", want, q)
	}
	ix.Learn(q, want)
	if got := rank(ix.Search(Query{Text: "details of a file"}), want); got != 1 {
		t.Errorf("after Learn, %s ranks %d for a similar query (was %d), want 1", want, got, before)
	}
	if got := rank(ix.Search(Query{Text: "post a chat message"}), want); got != 0 {
		t.Errorf("Learn leaked into an unrelated query: rank %d", got)
	}
	// However many similar pairs were learned, the boost is at most
	// LearnWeight (1) × the best score the words alone give.
	fresh := fixtureIndex(Options{})
	plain := fresh.Search(Query{Text: q})
	base := 0.0
	for _, h := range plain {
		if h.Name == want {
			base = h.Score
		}
	}
	for _, text := range []string{q, "file details size", "file details info", "details of file metadata", "file details path"} {
		for range 3 {
			fresh.Learn(text, want)
		}
	}
	boosted := fresh.Search(Query{Text: q})
	if boosted[0].Name != want || boosted[0].Score > base+plain[0].Score+1e-9 {
		t.Errorf("after many learned pairs: %s scores %v; want first with at most %v + %v", boosted[0].Name, boosted[0].Score, base, plain[0].Score)
	}

	// Bounded: with capacity 1, a second association evicts the first.
	small := fixtureIndex(Options{LearnCapacity: 1})
	small.Learn(q, want)
	small.Learn("something else entirely", qualified("time", "convert_time"))
	if got := rank(small.Search(Query{Text: q}), want); got != before {
		t.Errorf("an evicted association still boosts: rank %d, want %d", got, before)
	}
}

func TestSearchOrderIsDeterministicTiesByName(t *testing.T) {
	ix := New(Options{})
	same := tool("fetch_weather", "", "Fetch the weather forecast for a city.", `{"type":"object"}`, true)
	for _, s := range []string{"zeta", "alpha", "mid"} {
		ix.SetServer(Server{Name: s}, []Entry{{Name: "mcp__" + s + "__fetch_weather", Tool: same}})
	}
	want := []string{"mcp__alpha__fetch_weather", "mcp__mid__fetch_weather", "mcp__zeta__fetch_weather"}
	for range 20 {
		hits := ix.Search(Query{Text: "weather"})
		if !slices.Equal(names(hits), want) {
			t.Fatalf("hits %q, want %q", names(hits), want)
		}
		if hits[0].Score != hits[2].Score || hits[0].Score <= 0 {
			t.Fatalf("scores %v, want equal and positive", hits)
		}
	}
}

func TestSearchAnswersNothingForNothing(t *testing.T) {
	ix := fixtureIndex(Options{})
	for _, q := range []string{"", "   ", "the of a", "zzqqxx"} {
		if hits := ix.Search(Query{Text: q}); len(hits) != 0 {
			t.Errorf("%q found %q", q, names(hits))
		}
	}
	if hits := New(Options{}).Search(Query{Text: "file"}); hits != nil {
		t.Errorf("empty index found %v", hits)
	}
}

// TestIncrementalIndexMatchesAFreshOne churns servers in and out of an
// index at random and checks that every search ranks exactly as an index
// built from scratch with the same servers: the posting-list bookkeeping
// of SetServer and RemoveServer loses nothing and leaves nothing behind.
func TestIncrementalIndexMatchesAFreshOne(t *testing.T) {
	corpus := replicated(400)
	rng := rand.New(rand.NewPCG(1, 2))
	ix := New(Options{})
	present := map[int]int{} // corpus index → how many of its tools are indexed
	queries := []string{"read file", "create issue", "screenshot page", "list channels", "time zone", "move directory"}
	for round := range 300 {
		i := rng.IntN(len(corpus))
		switch rng.IntN(3) {
		case 0:
			ix.RemoveServer(corpus[i].srv.Name)
			delete(present, i)
		default:
			k := rng.IntN(len(corpus[i].entries) + 1)
			ix.SetServer(corpus[i].srv, corpus[i].entries[:k])
			present[i] = k
		}
		if round%25 != 24 {
			continue
		}
		fresh := New(Options{})
		n := 0
		for j, k := range present {
			fresh.SetServer(corpus[j].srv, corpus[j].entries[:k])
			n += k
		}
		if ix.Len() != n || fresh.Len() != n {
			t.Fatalf("round %d: Len %d, fresh %d, want %d", round, ix.Len(), fresh.Len(), n)
		}
		for _, q := range queries {
			a, b := ix.Search(Query{Text: q, Limit: 30}), fresh.Search(Query{Text: q, Limit: 30})
			if len(a) != len(b) {
				t.Fatalf("round %d %q: %d hits, fresh %d", round, q, len(a), len(b))
			}
			for k := range a {
				if a[k].Name != b[k].Name || fmt.Sprintf("%.9g", a[k].Score) != fmt.Sprintf("%.9g", b[k].Score) {
					t.Fatalf("round %d %q #%d: %s %.9g, fresh %s %.9g", round, q, k, a[k].Name, a[k].Score, b[k].Name, b[k].Score)
				}
			}
		}
	}
}

func TestIndexIsSafeForConcurrentUse(t *testing.T) {
	corpus := replicated(300)
	ix := New(Options{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				s := corpus[(i*7+w)%len(corpus)]
				switch (i + w) % 4 {
				case 0:
					ix.RemoveServer(s.srv.Name)
				case 1:
					ix.Learn("read the file", s.entries[0].Name)
				default:
					ix.SetServer(s.srv, s.entries)
				}
			}
		})
		wg.Go(func() {
			for range 200 {
				for _, h := range ix.Search(Query{Text: "read file contents", Limit: 5}) {
					if h.Score <= 0 || h.Name == "" {
						t.Errorf("bad hit %+v", h)
						return
					}
				}
			}
		})
	}
	testwait.Call(t, "the writers and searchers finish", wg.Wait)
}

// Pseudo-relevance feedback (Options.Feedback) adds the words of the
// names and titles of the best first-pass tools to the query: tools that
// share only those words with the query's best matches are then found,
// after them.
func TestFeedbackAddsTheBestToolsNameWords(t *testing.T) {
	times := []string{qualified("time", "convert_time"), qualified("time", "get_current_time")}
	shot := qualified("playwright", "browser_take_screenshot") // "the current page"
	plain := fixtureIndex(Options{}).Search(Query{Text: "timezone", Limit: 20})
	if got := names(plain[:2]); !slices.Equal(slices.Sorted(slices.Values(got)), times) || rank(plain, shot) != 0 {
		t.Fatalf("without feedback: %q, want the time tools first and no screenshot", got)
	}
	fb := fixtureIndex(Options{Feedback: 2}).Search(Query{Text: "timezone", Limit: 20})
	if got := names(fb[:2]); !slices.Equal(slices.Sorted(slices.Values(got)), times) {
		t.Errorf("with feedback the time tools still lead: %q", names(fb))
	}
	if rank(fb, shot) <= 2 {
		t.Errorf("with feedback, the screenshot tool (sharing \"current\" with get_current_time) should follow: %q", names(fb))
	}
}
