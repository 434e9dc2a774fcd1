package audit

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Redacted replaces a value that may be a secret (the same mark as the
// status's and the logs').
const Redacted = "[redacted]"

// Redact returns the JSON value raw (a call's arguments or result) with
// every value that may be a secret replaced by Redacted, by the rules
// the status and the logs use for a server's config (see the root
// package's StatusConfig and transports.SecretName), applied to JSON:
//   - the value of a member whose name names a secret (token, secret,
//     password, passwd, key, auth, credential, cookie; any case), whole,
//     whatever its type;
//   - in a string that is an absolute URL, its user info and its query
//     values (the names stay);
//   - a string that is itself a credential: "Bearer …" or "Basic …", a
//     JSON Web Token (three base64url parts, the first "eyJ"), a PEM
//     block, or a key of a well-known form (ghp_, gho_, ghs_, ghu_,
//     github_pat_, glpat-, sk-, sk_live_, xox?-, AKIA…, AIza…).
//
// A value longer than max bytes (max > 0) is replaced by a string that
// gives its size. Input that is not JSON is replaced whole.
func Redact(raw json.RawMessage, max int) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	if max > 0 && len(raw) > max {
		return json.RawMessage(strconv.Quote("[" + strconv.Itoa(len(raw)) + " bytes, not kept]"))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return json.RawMessage(strconv.Quote(Redacted))
	}
	out, err := json.Marshal(redactValue(v))
	if err != nil {
		return json.RawMessage(strconv.Quote(Redacted))
	}
	return out
}

func redactValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if transports.SecretName(k) {
				x[k] = Redacted
			} else {
				x[k] = redactValue(e)
			}
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = redactValue(e)
		}
		return x
	case string:
		return redactString(x)
	}
	return v
}

// tokenPrefixes are the beginnings of well-known credentials.
var tokenPrefixes = []string{"ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "glpat-", "sk-", "sk_live_", "rk_live_",
	"xoxb-", "xoxp-", "xoxa-", "xoxs-", "xapp-", "AKIA", "ASIA", "AIza", "ya29."}

// redactString redacts a string value: a credential whole, a URL's
// user info and query values.
func redactString(s string) string {
	t := strings.TrimSpace(s)
	if scheme, rest, ok := strings.Cut(t, " "); ok && rest != "" && (strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Basic")) {
		return Redacted
	}
	if strings.HasPrefix(t, "-----BEGIN ") {
		return Redacted
	}
	if strings.HasPrefix(t, "eyJ") && strings.Count(t, ".") == 2 && !strings.ContainsAny(t, " \n") {
		return Redacted
	}
	for _, p := range tokenPrefixes {
		if len(t) >= len(p)+12 && strings.HasPrefix(t, p) && !strings.ContainsAny(t, " \n") {
			return Redacted
		}
	}
	if strings.Contains(t, "://") {
		return redactURL(s)
	}
	return s
}

// redactURL hides a URL's user info and query values; a string that
// does not parse as an absolute URL is left as it is.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return raw
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	user := ""
	if u.User != nil {
		user = Redacted + "@"
		u.User = nil
	}
	keys := slices.Sorted(maps.Keys(u.Query()))
	frag := u.EscapedFragment()
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	s := u.String()
	if user != "" {
		s = strings.Replace(s, "://", "://"+user, 1)
	}
	for i, k := range keys {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		s += sep + url.QueryEscape(k) + "=" + Redacted
	}
	if frag != "" {
		s += "#" + frag
	}
	return s
}
