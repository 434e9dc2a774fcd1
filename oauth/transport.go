package oauth

import (
	"errors"
	"io"
	"maps"
	"net/http"
)

// Transport is an http.RoundTripper that sends the Source's access token
// as "Authorization: Bearer" on every request (POST, GET stream, DELETE,
// reconnects alike) and answers the server's 401 and 403 challenges:
// after a refresh, a new authorization or a step-up it sends the request
// once more. A challenge the source cannot answer returns the server's
// response as is (the transport reports the 401/403), with the reason
// kept in the source's Status. A request whose body cannot be replayed
// (no GetBody) is not retried.
type Transport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base   http.RoundTripper
	Source *Source
}

// maxAuthRetries bounds the retries of one request: a 401, then step-ups
// (which the Source limits itself, Config.MaxStepUps).
const maxAuthRetries = 4

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx := req.Context()
	tok, err := t.Source.Token(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		r := req
		if tok != "" || attempt > 0 {
			// A shallow copy with its own header map: the caller's
			// request is not modified (http.RoundTripper's contract).
			rc := *req
			rc.Header = maps.Clone(req.Header)
			if rc.Header == nil {
				rc.Header = http.Header{}
			}
			if attempt > 0 && req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				rc.Body = body
			}
			if tok != "" {
				rc.Header["Authorization"] = []string{"Bearer " + tok}
			} else {
				delete(rc.Header, "Authorization")
			}
			r = &rc
		}
		resp, err := base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			if resp.StatusCode < 300 && tok != "" {
				t.Source.Succeeded()
			}
			return resp, nil
		}
		if attempt >= maxAuthRetries || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
			return resp, nil
		}
		next, retry, aerr := t.Source.Unauthorized(ctx, resp.StatusCode, resp.Header.Values("WWW-Authenticate"), tok)
		if aerr != nil && !errors.Is(aerr, ErrNeedsLogin) && !errors.Is(aerr, ErrStepUpLimit) {
			// The authorization server failed (transient, a config
			// problem): that is the error, not the 401.
			drain(resp)
			return nil, aerr
		}
		if !retry {
			return resp, nil
		}
		drain(resp)
		tok = next
	}
}

func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
