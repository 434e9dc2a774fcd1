package transports

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// A server's URL may carry a secret in its user info (a token as the user
// name, a password) or its query (?api_key=…, ?token=…), and net/http
// quotes the whole URL of a failed request in its *url.Error. Every URL a
// transport puts in an error or a log goes through SafeURL, and every
// error of net/http (or of a library built on it) through RedactURLError.

// SafeURL renders u for an error or a log: scheme, host and path, with no
// user info, query or fragment. A nil u gives "".
func SafeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	s := *u
	s.User, s.RawQuery, s.ForceQuery, s.Fragment, s.RawFragment = nil, "", false, "", ""
	if s.Opaque != "" {
		// mailto:secret and the like: nothing in an opaque URL is known
		// to be safe.
		return s.Scheme + ":"
	}
	return s.String()
}

// invalidURL stands for a URL that does not parse, in SafeURLString.
const invalidURL = "(an invalid URL)"

// SafeURLString is SafeURL of the URL raw; a URL that does not parse is
// not shown at all.
func SafeURLString(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return invalidURL
	}
	return SafeURL(u)
}

// RedactURLError returns err with the URL of every *url.Error in it (the
// error net/http's Client.Do and url.Parse return, which quotes the whole
// URL) reduced to SafeURLString. A *url.Error at the top is replaced by a
// copy with the safe URL, so errors.As still finds a *url.Error (with
// Timeout and Temporary intact) and errors.Is still sees what it wraps.
// When the *url.Error is deeper, under wrappers that copied its text, the
// result's message is err's with the URL replaced, and it unwraps to the
// redacted *url.Error (the wrappers in between are dropped, since their
// text holds the URL). A nil err gives nil.
func RedactURLError(err error) error {
	var ue *url.Error
	if err == nil || !errors.As(err, &ue) {
		return err
	}
	safe := &url.Error{Op: ue.Op, URL: SafeURLString(ue.URL), Err: RedactURLError(ue.Err)}
	if top, ok := err.(*url.Error); ok && top == ue {
		return safe
	}
	msg := err.Error()
	if ue.URL != "" {
		msg = strings.ReplaceAll(msg, strconv.Quote(ue.URL), strconv.Quote(safe.URL))
		msg = strings.ReplaceAll(msg, ue.URL, safe.URL)
	}
	if inner := ue.Err.Error(); inner != safe.Err.Error() {
		msg = strings.ReplaceAll(msg, inner, safe.Err.Error())
	}
	return &redactedError{msg: msg, err: safe}
}

// redactedError is an error whose text had a URL reduced to SafeURL.
type redactedError struct {
	msg string
	err *url.Error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
