package search

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	testdata    = "testdata"
	queriesFile = "testdata/queries.json"
)

func loadAll(t testing.TB) ([]Server, []Query) {
	t.Helper()
	servers, err := LoadCorpus(testdata)
	if err != nil {
		t.Fatalf("LoadCorpus: %v", err)
	}
	qs, err := LoadQueries(queriesFile)
	if err != nil {
		t.Fatalf("LoadQueries: %v", err)
	}
	return servers, qs
}

// The corpus is several hundred tools from servers captured with their
// package versions.
func TestCorpusLoads(t *testing.T) {
	servers, _ := loadAll(t)
	if n := ToolCount(servers); n < 400 {
		t.Errorf("corpus has %d tools, want at least 400", n)
	}
	if len(servers) < 20 {
		t.Errorf("corpus has %d servers, want at least 20", len(servers))
	}
	for _, s := range servers {
		if !strings.Contains(s.Package, "@") || s.ServerInfo.Name == "" {
			t.Errorf("server %q: package %q, serverInfo.name %q: want package@version and a serverInfo", s.Name, s.Package, s.ServerInfo.Name)
		}
	}
}

func TestLoadCorpusRejectsBadFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not json":       "{",
		"no tools":       `{"name":"x","tools":[]}`,
		"no name":        `{"tools":[{"name":"a","inputSchema":{}}]}`,
		"duplicate tool": `{"name":"x","tools":[{"name":"a","inputSchema":{}},{"name":"a","inputSchema":{}}]}`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadCorpus(dir); !errors.Is(err, ErrCorpus) {
			t.Errorf("%s: LoadCorpus error %v, want ErrCorpus", name, err)
		}
	}
}

func TestReplicate(t *testing.T) {
	servers, _ := loadAll(t)
	big := Replicate(servers, 10000)
	if n := ToolCount(big); n < 10000 {
		t.Fatalf("Replicate: %d tools, want >= 10000", n)
	}
	seen := map[string]bool{}
	for _, s := range big {
		if seen[s.Name] {
			t.Fatalf("Replicate: server name %q twice", s.Name)
		}
		seen[s.Name] = true
	}
}

// Every query is well formed, its wanted tools exist, and its split is the
// one SplitFor assigns (nobody picked the held-out queries).
func TestQueriesValid(t *testing.T) {
	servers, qs := loadAll(t)
	tools := map[string]bool{}
	for _, s := range servers {
		for _, tl := range s.Tools {
			tools[ID(s.Name, tl.Name)] = true
		}
	}
	ids := map[string]bool{}
	count := map[string]int{}
	perServer := map[string]int{}
	for _, q := range qs {
		if q.ID == "" || ids[q.ID] {
			t.Errorf("query id %q empty or duplicate", q.ID)
		}
		ids[q.ID] = true
		if strings.TrimSpace(q.Text) == "" || len(q.Want) == 0 {
			t.Errorf("%s: empty text or want", q.ID)
		}
		for _, w := range q.Want {
			if !tools[w] {
				t.Errorf("%s: wanted tool %q is not in the corpus", q.ID, w)
			}
		}
		if q.Kind != "model" && q.Kind != "user" {
			t.Errorf("%s: kind %q", q.ID, q.Kind)
		}
		if q.Split != SplitFor(q.ID) {
			t.Errorf("%s: split %q, SplitFor says %q", q.ID, q.Split, SplitFor(q.ID))
		}
		count[q.Kind]++
		count[q.Split]++
		if q.NoOverlap {
			count["noOverlap"]++
		}
		perServer[strings.SplitN(q.Want[0], "/", 2)[0]]++
	}
	if len(qs) < 150 || count["noOverlap"] < 40 || count["model"] < 50 || count["user"] < 50 || count["heldout"] < 40 {
		t.Errorf("query counts %v of %d: want >= 150 queries, >= 40 noOverlap, >= 50 of each kind, >= 40 held out", count, len(qs))
	}
	for _, s := range servers {
		if perServer[s.Name] == 0 {
			t.Errorf("no query's first wanted tool is on server %q", s.Name)
		}
	}
}

// stopwords are the function words a query may share with a wanted tool and
// still claim noOverlap; every other word counts as content.
var stopwords = setOf(`a an the and or but if of to in on at by for from with without into onto over under
about as is are was were be been being am do does did done have has had i me my mine we us our you your it its
this that these those there here what which who whom whose when where why how can could would should will shall
may might must not no so than then too very just some any all each every more most much many s t d ll re ve m
please let lets it's what's up out off down also only another other like them they their he she his her him`)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// stem folds the common English endings so that "entities" and "entity",
// "searched" and "search" count as the same word when checking noOverlap.
func stem(w string) string {
	for _, suf := range []string{"ing", "ies", "es", "ed", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			w = strings.TrimSuffix(w, suf)
			if suf == "ies" {
				w += "y"
			}
			break
		}
	}
	return w
}

// sameWord says whether two words count as one for noOverlap: equal stems,
// or the shorter (three letters or more) begins the longer ("file" and
// "files", "log" and "logging", "name" and "named"). It errs on the side of
// overlap, so that a noOverlap claim is conservative.
func sameWord(a, b string) bool {
	if stem(a) == stem(b) {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 3 && strings.HasPrefix(b, a)
}

// overlap lists the content words of text that count as the same word as
// one in the named tools' names, titles or descriptions.
func overlap(text string, tools []string, byID map[string]string) []string {
	var toolWords []string
	for _, id := range tools {
		toolWords = append(toolWords, Words(byID[id])...)
	}
	var out []string
	for _, w := range Words(text) {
		if stopwords[w] || len(w) < 2 {
			continue
		}
		for _, tw := range toolWords {
			if sameWord(w, tw) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// A query marked noOverlap shares no content word (stemmed) with the name
// or the description of any tool it wants.
func TestNoOverlapHolds(t *testing.T) {
	servers, qs := loadAll(t)
	byID := map[string]string{}
	for _, s := range servers {
		for _, tl := range s.Tools {
			byID[ID(s.Name, tl.Name)] = tl.Name + " " + tl.Title + " " + tl.Description
		}
	}
	for _, q := range qs {
		if !q.NoOverlap {
			continue
		}
		if ws := overlap(q.Text, q.Want, byID); len(ws) > 0 {
			t.Errorf("%s: marked noOverlap but shares %v with %v", q.ID, ws, q.Want)
		}
	}
}

func TestOverlapCheck(t *testing.T) {
	byID := map[string]string{"fs/read_file": "read_file Read the complete contents of a file"}
	if ws := overlap("show me what's in the files", []string{"fs/read_file"}, byID); len(ws) != 1 || ws[0] != "files" {
		t.Errorf("overlap = %v, want [files]", ws)
	}
	if ws := overlap("the log of what was named", []string{"fs/x"}, map[string]string{"fs/x": "logging name"}); len(ws) != 2 {
		t.Errorf("overlap = %v, want [log named]", ws)
	}
	if ws := overlap("what does notes.txt say", []string{"fs/read_file"}, byID); len(ws) != 0 {
		t.Errorf("overlap = %v, want none", ws)
	}
}
