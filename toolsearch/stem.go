package toolsearch

import (
	"slices"
	"strings"
)

// Stem reduces an English word to a stem so that inflections and
// derivations of one word meet: "files" and "file", "listing" and
// "lists", "created" and "creation". It follows the suffix rules of
// M. F. Porter's 1980 algorithm ("An algorithm for suffix stripping"),
// written for this package. Words that are not plain lower-case ASCII
// letters, or shorter than three letters, are returned unchanged.
func Stem(word string) string {
	if len(word) < 3 {
		return word
	}
	for i := 0; i < len(word); i++ {
		if word[i] < 'a' || word[i] > 'z' {
			return word
		}
	}
	w := []byte(word)
	w = step1a(w)
	w = step1b(w)
	w = step1c(w)
	w = applyRules(w, step2Rules, 0)
	w = applyRules(w, step3Rules, 0)
	w = step4(w)
	w = step5(w)
	return string(w)
}

// consonant reports whether w[i] is a consonant: not a, e, i, o, u, and
// y only when it follows a vowel (or starts the word).
func consonant(w []byte, i int) bool {
	switch w[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !consonant(w, i-1)
	}
	return true
}

// measure counts the vowel-consonant sequences of w: m in [C](VC)^m[V].
func measure(w []byte) int {
	m := 0
	inVowel := false
	for i := range w {
		if consonant(w, i) {
			if inVowel {
				m++
			}
			inVowel = false
		} else {
			inVowel = true
		}
	}
	return m
}

func hasVowel(w []byte) bool {
	for i := range w {
		if !consonant(w, i) {
			return true
		}
	}
	return false
}

// doubleConsonant reports whether w ends in two equal consonants.
func doubleConsonant(w []byte) bool {
	n := len(w)
	return n >= 2 && w[n-1] == w[n-2] && consonant(w, n-1)
}

// cvc reports whether w ends consonant-vowel-consonant where the last is
// not w, x or y ("hop", not "snow").
func cvc(w []byte) bool {
	n := len(w)
	if n < 3 || !consonant(w, n-3) || consonant(w, n-2) || !consonant(w, n-1) {
		return false
	}
	switch w[n-1] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}

func hasSuffix(w []byte, s string) bool {
	return len(w) >= len(s) && string(w[len(w)-len(s):]) == s
}

func step1a(w []byte) []byte {
	switch {
	case hasSuffix(w, "sses"), hasSuffix(w, "ies"):
		return w[:len(w)-2]
	case hasSuffix(w, "ss"):
		return w
	case hasSuffix(w, "s"):
		return w[:len(w)-1]
	}
	return w
}

func step1b(w []byte) []byte {
	if hasSuffix(w, "eed") {
		if measure(w[:len(w)-3]) > 0 {
			return w[:len(w)-1]
		}
		return w
	}
	var stem []byte
	switch {
	case hasSuffix(w, "ed"):
		stem = w[:len(w)-2]
	case hasSuffix(w, "ing"):
		stem = w[:len(w)-3]
	default:
		return w
	}
	if !hasVowel(stem) {
		return w
	}
	switch {
	case hasSuffix(stem, "at"), hasSuffix(stem, "bl"), hasSuffix(stem, "iz"):
		return append(stem, 'e')
	case doubleConsonant(stem):
		switch stem[len(stem)-1] {
		case 'l', 's', 'z':
			return stem
		}
		return stem[:len(stem)-1]
	case measure(stem) == 1 && cvc(stem):
		return append(stem, 'e')
	}
	return stem
}

func step1c(w []byte) []byte {
	if hasSuffix(w, "y") && hasVowel(w[:len(w)-1]) {
		w[len(w)-1] = 'i'
	}
	return w
}

// rule replaces a suffix when the stem before it has measure > min.
type rule struct{ suffix, repl string }

// byLength orders rules longest suffix first, so the longest match wins.
func byLength(rs []rule) []rule {
	slices.SortStableFunc(rs, func(a, b rule) int { return len(b.suffix) - len(a.suffix) })
	return rs
}

var step2Rules = byLength([]rule{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"},
	{"izer", "ize"}, {"abli", "able"}, {"alli", "al"}, {"entli", "ent"},
	{"eli", "e"}, {"ousli", "ous"}, {"ization", "ize"}, {"ation", "ate"},
	{"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"}, {"fulness", "ful"},
	{"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
})

var step3Rules = byLength([]rule{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
	{"ical", "ic"}, {"ful", ""}, {"ness", ""},
})

// applyRules applies the first (longest) rule whose suffix w has, when
// the stem before the suffix has a measure above min.
func applyRules(w []byte, rules []rule, min int) []byte {
	for _, r := range rules {
		if !hasSuffix(w, r.suffix) {
			continue
		}
		stem := w[:len(w)-len(r.suffix)]
		if measure(stem) > min {
			return append(stem, r.repl...)
		}
		return w
	}
	return w
}

var step4Suffixes = func() []string {
	s := []string{"al", "ance", "ence", "er", "ic", "able", "ible", "ant",
		"ement", "ment", "ent", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize"}
	slices.SortStableFunc(s, func(a, b string) int { return len(b) - len(a) })
	return s
}()

func step4(w []byte) []byte {
	for _, s := range step4Suffixes {
		if !hasSuffix(w, s) {
			continue
		}
		stem := w[:len(w)-len(s)]
		if s == "ion" && !(hasSuffix(stem, "s") || hasSuffix(stem, "t")) {
			return w
		}
		if measure(stem) > 1 {
			return stem
		}
		return w
	}
	return w
}

func step5(w []byte) []byte {
	if hasSuffix(w, "e") {
		stem := w[:len(w)-1]
		if m := measure(stem); m > 1 || (m == 1 && !cvc(stem)) {
			w = stem
		}
	}
	if hasSuffix(w, "ll") && measure(w) > 1 {
		w = w[:len(w)-1]
	}
	return w
}

// stemAll stems each word of a space-separated phrase.
func stemAll(phrase string) []string {
	f := strings.Fields(phrase)
	for i, w := range f {
		f[i] = Stem(strings.ToLower(w))
	}
	return f
}
