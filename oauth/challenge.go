package oauth

import (
	"cmp"
	"strings"
)

// Challenge is one authentication challenge of a WWW-Authenticate header
// (RFC 9110 §11.6.1): a scheme with either auth-params or a token68.
type Challenge struct {
	// Scheme is the auth-scheme, lower-cased ("bearer", "basic", …).
	Scheme string
	// Params holds the auth-params by lower-cased name, unquoted. When a
	// name occurs twice (which RFC 9110 forbids) the first value is kept.
	Params map[string]string
	// Token68 is the token68 form of the credentials, if the challenge
	// used it instead of params.
	Token68 string
}

// Param returns the value of the named parameter (case-insensitive).
func (c Challenge) Param(name string) string { return c.Params[strings.ToLower(name)] }

// ParseChallenges parses the values of every WWW-Authenticate header of a
// response (several headers, several challenges per header) into their
// challenges, in order. It is lenient where servers are sloppy — spaces
// around "=", single-quoted values, duplicate parameters, stray commas —
// and never fails: what cannot be parsed is skipped.
func ParseChallenges(headers []string) []Challenge {
	var out []Challenge
	for _, h := range headers {
		out = append(out, parseHeader(h)...)
	}
	return out
}

// maxChallengeLen bounds the header text parsed, against hostile servers.
const maxChallengeLen = 16 << 10

type challengeLexer struct {
	s string
	i int
}

func (l *challengeLexer) skipSpace() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
}

func (l *challengeLexer) skipSpaceAndCommas() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t' || l.s[l.i] == ',') {
		l.i++
	}
}

func isTokenChar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

func isToken68Char(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("-._~+/", b) >= 0
}

// token reads a token (without single quotes, which start a quoted value
// in the lenient grammar).
func (l *challengeLexer) token() string {
	start := l.i
	for l.i < len(l.s) && isTokenChar(l.s[l.i]) && l.s[l.i] != '\'' {
		l.i++
	}
	return l.s[start:l.i]
}

// quoted reads a quoted string starting at the quote character q.
func (l *challengeLexer) quoted(q byte) string {
	l.i++ // opening quote
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '\\' && q == '"' && l.i+1 < len(l.s):
			b.WriteByte(l.s[l.i+1])
			l.i += 2
		case c == q:
			l.i++
			return b.String()
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	return b.String() // unterminated: take the rest
}

// value reads a param value: a quoted string or a token (read up to the
// next comma or space, to accept the odd unquoted URL).
func (l *challengeLexer) value() string {
	if l.i < len(l.s) && (l.s[l.i] == '"' || l.s[l.i] == '\'') {
		return l.quoted(l.s[l.i])
	}
	start := l.i
	for l.i < len(l.s) && l.s[l.i] != ',' && l.s[l.i] != ' ' && l.s[l.i] != '\t' {
		l.i++
	}
	return l.s[start:l.i]
}

// peekParam reports whether a "name = value" param starts at the current
// position (as opposed to the next challenge's scheme).
func (l *challengeLexer) peekParam() bool {
	save := l.i
	defer func() { l.i = save }()
	if l.token() == "" {
		return false
	}
	l.skipSpace()
	if l.i >= len(l.s) || l.s[l.i] != '=' {
		return false
	}
	// "name=" followed by end or comma is a token68 with padding, not a
	// param; anything else is a param.
	for l.i < len(l.s) && l.s[l.i] == '=' {
		l.i++
	}
	l.skipSpace()
	return l.i < len(l.s) && l.s[l.i] != ','
}

func parseHeader(h string) []Challenge {
	if len(h) > maxChallengeLen {
		h = h[:maxChallengeLen]
	}
	l := &challengeLexer{s: h}
	var out []Challenge
	for {
		l.skipSpaceAndCommas()
		if l.i >= len(l.s) {
			return out
		}
		scheme := l.token()
		if scheme == "" {
			l.i++ // junk: skip a character and resynchronise
			continue
		}
		c := Challenge{Scheme: strings.ToLower(scheme), Params: map[string]string{}}
		l.skipSpace()
		// token68?
		if l.i < len(l.s) && l.s[l.i] != ',' && !l.peekParam() {
			start := l.i
			for l.i < len(l.s) && isToken68Char(l.s[l.i]) {
				l.i++
			}
			for l.i < len(l.s) && l.s[l.i] == '=' {
				l.i++
			}
			save := l.i
			l.skipSpace()
			if l.i >= len(l.s) || l.s[l.i] == ',' {
				c.Token68 = l.s[start:save]
			} else {
				l.i = start // not a token68 either: let the param loop resynchronise
			}
		}
		// auth-params, until the next scheme.
		for {
			l.skipSpaceAndCommas()
			if l.i >= len(l.s) || !l.peekParam() {
				break
			}
			name := strings.ToLower(l.token())
			l.skipSpace()
			l.i++ // '='
			l.skipSpace()
			v := l.value()
			if _, dup := c.Params[name]; !dup {
				c.Params[name] = v
			}
		}
		out = append(out, c)
	}
}

// BearerChallenge is what mcpvisor reads from the authentication
// challenge of a protected resource: a Bearer challenge (RFC 6750 §3, RFC
// 9728 §5.1) or a DPoP challenge (RFC 9449 §7.1), which carry the same
// parameters.
type BearerChallenge struct {
	// ResourceMetadata is the protected resource metadata URL, if given.
	ResourceMetadata string
	// Scope is the space-separated scope the resource asks for.
	Scope string
	// Error is the OAuth error code ("invalid_token",
	// "insufficient_scope", "use_dpop_nonce", …), and ErrorDescription
	// its text.
	Error            string
	ErrorDescription string
	// DPoP is set when the resource sent a DPoP challenge: it accepts
	// (or demands) DPoP-bound tokens. DPoPAlgs are the proof algorithms
	// it lists (its algs parameter), if any.
	DPoP     bool
	DPoPAlgs []string
}

// Scopes returns Scope split on spaces.
func (b BearerChallenge) Scopes() []string { return strings.Fields(b.Scope) }

// ParseBearer finds the first Bearer challenge of the WWW-Authenticate
// header values. ok is false when there is none.
func ParseBearer(headers []string) (b BearerChallenge, ok bool) {
	for _, c := range ParseChallenges(headers) {
		if c.Scheme == "bearer" {
			return challengeParams(c), true
		}
	}
	return BearerChallenge{}, false
}

// ParseResourceChallenge reads the challenges of a protected resource's
// 401 or 403: the DPoP challenge when there is one (DPoP set), else the
// Bearer challenge. A DPoP challenge without a parameter the Bearer one
// has (a server sending both, the error on one of them) takes it from the
// Bearer challenge. ok is false when there is neither.
func ParseResourceChallenge(headers []string) (b BearerChallenge, ok bool) {
	var bearer, dpop *Challenge
	challenges := ParseChallenges(headers)
	for i := range challenges {
		switch c := &challenges[i]; {
		case c.Scheme == "bearer" && bearer == nil:
			bearer = c
		case c.Scheme == "dpop" && dpop == nil:
			dpop = c
		}
	}
	switch {
	case dpop != nil:
		b = challengeParams(*dpop)
		b.DPoP = true
		b.DPoPAlgs = strings.Fields(dpop.Param("algs"))
		if bearer != nil {
			o := challengeParams(*bearer)
			b.ResourceMetadata = cmp.Or(b.ResourceMetadata, o.ResourceMetadata)
			b.Scope = cmp.Or(b.Scope, o.Scope)
			if b.Error == "" {
				b.Error, b.ErrorDescription = o.Error, o.ErrorDescription
			}
		}
		return b, true
	case bearer != nil:
		return challengeParams(*bearer), true
	}
	return BearerChallenge{}, false
}

func challengeParams(c Challenge) BearerChallenge {
	return BearerChallenge{
		ResourceMetadata: c.Param("resource_metadata"),
		Scope:            c.Param("scope"),
		Error:            c.Param("error"),
		ErrorDescription: c.Param("error_description"),
	}
}
