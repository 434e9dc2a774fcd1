package toolsearch

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenizeSplitsTheWaysToolNamesAreWritten(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"camelCase", []string{"camel", "case"}},
		{"getUserProfile", []string{"get", "user", "profile"}},
		{"HTTPServer", []string{"http", "server"}},
		{"parseJSONBody", []string{"parse", "json", "body"}},
		{"read_text_file", []string{"read", "text", "file"}},
		{"browser-take-screenshot", []string{"browser", "take", "screenshot"}},
		{"fs.readFile", []string{"fs", "read", "file"}},
		{"repos/owner/name", []string{"repos", "owner", "name"}},
		{"mcp__github__create_issue", []string{"mcp", "github", "create", "issue"}},
		{"v2api oauth2Token", []string{"v", "2", "api", "oauth", "2", "token"}},
		{"Read the contents of a file.", []string{"read", "contents", "file"}},
		{"ÜberGröße straße", []string{"über", "größe", "straße"}},
		{"", nil},
		{"  __--..  ", nil},
	} {
		if got := Tokenize(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTokenizeIsBounded(t *testing.T) {
	long := strings.Repeat("x", 1000)
	if got := Tokenize(long); len(got) != 1 || len(got[0]) != maxTokenRunes {
		t.Fatalf("a 1000-letter word gave %d tokens, first of %d bytes; want one of %d", len(got), len(got[0]), maxTokenRunes)
	}
	many := strings.Repeat("ab ", 3*maxTokens)
	if got := Tokenize(many); len(got) != maxTokens {
		t.Fatalf("%d words gave %d tokens, want the cap %d", 3*maxTokens, len(got), maxTokens)
	}
}

func TestStemConflatesInflections(t *testing.T) {
	for _, group := range [][]string{
		{"file", "files", "filed"},
		{"list", "lists", "listing", "listed"},
		{"create", "creates", "created", "creating"},
		{"directory", "directories"},
		{"search", "searches", "searching", "searched"},
		{"connect", "connected", "connecting", "connection", "connections"},
		{"relational", "relate", "relating"},
		{"run", "running"},
		{"repository", "repositories"},
	} {
		want := Stem(group[0])
		for _, w := range group[1:] {
			if got := Stem(w); got != want {
				t.Errorf("Stem(%q) = %q, want %q (Stem(%q))", w, got, want, group[0])
			}
		}
	}
	for in, want := range map[string]string{
		"caresses": "caress", "ponies": "poni", "agreed": "agre", "hopping": "hop",
		"happy": "happi", "generalization": "gener", "electrical": "electr",
		"adjustment": "adjust", "controll": "control", "ab": "ab", "ÜBER": "ÜBER", "x2y": "x2y",
	} {
		if got := Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"camelCase", "HTTPServer", "read_text_file", "a-b.c/d", "v2api", "ÜberGröße", "\xff\xfe", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokenize(s)
		if len(toks) > maxTokens || len(toks) > len(s) {
			t.Fatalf("%d tokens from %d bytes", len(toks), len(s))
		}
		for _, tok := range toks {
			if tok == "" || utf8.RuneCountInString(tok) > maxTokenRunes {
				t.Fatalf("token %q", tok)
			}
			if st := Stem(tok); len(st) > len(tok) {
				t.Fatalf("Stem(%q) = %q grew", tok, st)
			}
		}
	})
}

// FuzzSearch: any query text ranks without panicking, within the limit,
// best first, every score positive.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"read file", "getUserProfile", strings.Repeat("a b c d e f g h ", 20), "\x00\xff", ""} {
		f.Add(s)
	}
	ix := fixtureIndex(Options{})
	ix.Learn("read the file", qualified("filesystem", "read_text_file"))
	f.Fuzz(func(t *testing.T, q string) {
		hits := ix.Search(Query{Text: q, Limit: 5})
		if len(hits) > 5 {
			t.Fatalf("%d hits", len(hits))
		}
		for i, h := range hits {
			if h.Score <= 0 || (i > 0 && h.Score > hits[i-1].Score) {
				t.Fatalf("hit %d: %+v", i, h)
			}
		}
	})
}
