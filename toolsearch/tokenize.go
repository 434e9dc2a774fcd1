package toolsearch

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Limits that keep tokenizing bounded whatever the input.
const (
	maxTokenRunes = 40    // a longer run of letters is cut to its first 40
	maxTokens     = 10000 // tokens past this many are dropped
)

// stopwords are words too common in requests and descriptions to help
// ranking. The list is short on purpose: verbs such as "get" or "list"
// carry meaning in tool vocabulary and are not here.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "for": true,
	"in": true, "on": true, "and": true, "or": true, "is": true, "are": true,
	"be": true, "been": true, "was": true, "were": true, "with": true,
	"by": true, "this": true, "that": true, "these": true, "those": true,
	"it": true, "its": true, "from": true, "as": true, "at": true, "me": true,
	"my": true, "i": true, "you": true, "your": true, "we": true, "our": true,
	"can": true, "could": true, "would": true, "should": true, "will": true,
	"do": true, "does": true, "please": true, "some": true, "into": true,
	"about": true, "which": true, "what": true, "how": true, "if": true,
	"then": true, "than": true, "there": true, "their": true, "them": true,
	"want": true, "need": true, "like": true, "let": true, "s": true,
}

// runeClass is how the tokenizer sees one character.
type runeClass uint8

const (
	classSep runeClass = iota
	classLower
	classUpper
	classDigit
)

func classify(r rune) runeClass {
	switch {
	case r >= 'a' && r <= 'z':
		return classLower
	case r >= 'A' && r <= 'Z':
		return classUpper
	case r >= '0' && r <= '9':
		return classDigit
	case r < utf8.RuneSelf:
		return classSep
	case unicode.IsUpper(r):
		return classUpper
	case unicode.IsLetter(r):
		return classLower // lower case and caseless letters
	case unicode.IsDigit(r):
		return classDigit
	default:
		return classSep
	}
}

// Tokenize splits text into lower-case words the way tool names and
// descriptions are written: on anything that is not a letter or digit
// ("_", "-", ".", "/", spaces, punctuation), where lower case turns to
// upper ("camelCase" → camel, case), before the last capital of a run
// followed by lower case ("HTTPServer" → http, server), and between
// letters and digits ("v2api" → v, 2, api). Stopwords are dropped. A word
// longer than 40 characters is cut to 40, and at most 10,000 tokens are
// returned, so the output is bounded by the input's length.
func Tokenize(text string) []string {
	var out []string
	emit := func(tok string) {
		if len(out) >= maxTokens || tok == "" {
			return
		}
		tok = strings.ToLower(tok)
		if utf8.RuneCountInString(tok) > maxTokenRunes {
			n := 0
			for i := range tok {
				if n == maxTokenRunes {
					tok = tok[:i]
					break
				}
				n++
			}
		}
		if stopwords[tok] {
			return
		}
		out = append(out, tok)
	}
	start := -1 // byte offset of the current token, -1 when none
	var prev runeClass = classSep
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		c := classify(r)
		if c == classSep {
			if start >= 0 {
				emit(text[start:i])
				start = -1
			}
			prev, i = c, i+size
			continue
		}
		if start >= 0 {
			split := false
			switch {
			case prev == classLower && c == classUpper:
				split = true
			case prev == classUpper && c == classUpper:
				// Split before this capital when lower case follows it:
				// "HTTPServer" → "HTTP" + "Server".
				if i+size < len(text) {
					nr, _ := utf8.DecodeRuneInString(text[i+size:])
					split = classify(nr) == classLower
				}
			case (prev == classDigit) != (c == classDigit):
				split = true
			}
			if split {
				emit(text[start:i])
				start = i
			}
		} else {
			start = i
		}
		prev, i = c, i+size
	}
	if start >= 0 {
		emit(text[start:])
	}
	return out
}

// analyze is Tokenize followed by Stem: the terms the index stores.
func analyze(text string) []string {
	toks := Tokenize(text)
	for i, t := range toks {
		toks[i] = cachedStem(t)
	}
	return toks
}

// stems caches Stem for the words seen (tool vocabulary is small and
// repeats across servers); it stops growing at maxCachedStems entries.
var (
	stems  sync.Map // word → stem
	nStems atomic.Int64
)

const maxCachedStems = 1 << 16

func cachedStem(word string) string {
	if s, ok := stems.Load(word); ok {
		return s.(string)
	}
	s := Stem(word)
	if nStems.Load() < maxCachedStems {
		if _, loaded := stems.LoadOrStore(word, s); !loaded {
			nStems.Add(1)
		}
	}
	return s
}
