package transports

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// A server may repeat a secret it was given in what it says back: a
// stdio server's usage message quotes its arguments, an error page
// quotes the request. What a transport quotes from a server (stderr, an
// HTTP error body) is scrubbed of the secrets the server was given.

// Scrubbed replaces a secret in text quoted from a server.
const Scrubbed = "[redacted]"

// minSecretLen is the shortest value Scrub replaces: shorter ones ("1",
// "on") are not secrets, and replacing them would garble the text.
const minSecretLen = 6

// SecretName reports whether the name of a flag, an environment variable
// or a header names a secret: it holds token, secret, password, passwd,
// key (api-key, apikey, …), auth (Authorization) or credential, in any
// case, or is Cookie.
func SecretName(name string) bool {
	n := strings.ToLower(strings.TrimLeft(name, "-"))
	if n == "cookie" {
		return true
	}
	for _, w := range []string{"token", "secret", "password", "passwd", "key", "auth", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// ConfigSecrets returns the values of a server's config that may be
// secrets and that the server may repeat: the values of env variables
// and headers whose name is a secret's (SecretName), the value of an
// argument whose flag is one (--token=…, --api-key …), and the user
// info and query values of its URL and of any env value or argument
// that is a URL.
func ConfigSecrets(cfg Config) []string {
	var out []string
	add := func(v string) {
		if len(v) >= minSecretLen {
			out = append(out, v)
		}
		// A header's "Bearer <token>": the token alone too.
		if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= minSecretLen {
			out = append(out, tok)
		}
	}
	for k, v := range cfg.Env {
		if SecretName(k) {
			add(v)
		}
		out = append(out, urlSecrets(v)...)
	}
	for k, v := range cfg.Headers {
		if SecretName(k) {
			add(v)
		}
	}
	secretNext := false
	for _, a := range cfg.Args {
		switch {
		case secretNext:
			add(a)
			secretNext = false
		case strings.HasPrefix(a, "-"):
			flag, v, hasValue := strings.Cut(a, "=")
			if hasValue {
				if SecretName(flag) {
					add(v)
				}
				out = append(out, urlSecrets(v)...)
			} else {
				secretNext = SecretName(flag)
			}
		default:
			out = append(out, urlSecrets(a)...)
		}
	}
	out = append(out, urlSecrets(cfg.URL)...)
	return compact(out)
}

// RequestSecrets returns what a request carries that may be secret: its
// URL's user info and query values, and the values of its headers whose
// name is a secret's.
func RequestSecrets(req *http.Request) []string {
	if req == nil {
		return nil
	}
	var out []string
	if req.URL != nil {
		out = append(out, urlValues(req.URL)...)
	}
	for k, vs := range req.Header {
		if !SecretName(k) {
			continue
		}
		for _, v := range vs {
			if len(v) >= minSecretLen {
				out = append(out, v)
			}
			if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= minSecretLen {
				out = append(out, tok)
			}
		}
	}
	return compact(out)
}

// urlSecrets is urlValues of s when s is an absolute URL.
func urlSecrets(s string) []string {
	if !strings.Contains(s, "://") {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil
	}
	return urlValues(u)
}

// urlValues returns u's user name, password and query values.
func urlValues(u *url.URL) []string {
	var out []string
	if u.User != nil {
		out = append(out, u.User.Username())
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return slices.DeleteFunc(out, func(v string) bool { return len(v) < minSecretLen })
}

// compact sorts secrets longest first (so that a secret containing
// another is replaced whole) and drops duplicates.
func compact(s []string) []string {
	slices.SortFunc(s, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(s)
}

// Scrub returns text with every one of secrets replaced by Scrubbed; text
// itself when none occurs in it.
func Scrub(text []byte, secrets []string) []byte {
	for _, s := range secrets {
		if len(s) >= minSecretLen && bytes.Contains(text, []byte(s)) {
			text = bytes.ReplaceAll(text, []byte(s), []byte(Scrubbed))
		}
	}
	return text
}
