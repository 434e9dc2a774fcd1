package oauth

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
)

// Transport is an http.RoundTripper that sends the Source's access token
// on every request (POST, GET stream, DELETE, reconnects alike), as
// "Authorization: Bearer", or for a DPoP-bound token with the DPoP scheme
// and a fresh proof (Source.SetAuthorization), and answers the server's
// 401 and 403 challenges (a DPoP nonce demanded included):
// after a refresh, a new authorization or a step-up it sends the request
// once more. A challenge the source cannot answer returns the server's
// response as is (the transport reports the 401/403), with the reason
// kept in the source's Status. A request whose body cannot be replayed
// (no GetBody) is not retried.
type Transport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// Source provides the tokens. When it is nil, Lazy must be set.
	Source *Source
	// Lazy provides the source of a transport built without one, for
	// servers that may never ask for authorization (a Source costs about
	// a kilobyte each): with create false it returns the source if there
	// is one to use (nil: the request goes without a token); with create
	// true, after the server answered a request with 401 or 403, it
	// returns a source, creating it if needed, that answers the
	// challenge as above. An error fails the request.
	Lazy func(ctx context.Context, create bool) (*Source, error)
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
	src := t.Source
	if src == nil {
		if t.Lazy == nil {
			closeBody(req)
			return nil, errors.New("oauth: a Transport needs a Source or Lazy")
		}
		var err error
		if src, err = t.Lazy(ctx, false); err != nil {
			closeBody(req)
			return nil, err
		}
		if src == nil {
			// No source yet: the request goes as it is, and only a
			// challenge it can answer (a replayable request) creates one.
			resp, err := base.RoundTrip(req)
			if err != nil || !challenged(resp) || !replayable(req) {
				return resp, err
			}
			if src, err = t.Lazy(ctx, true); err != nil {
				drain(resp)
				return nil, err
			}
			src.Observe(resp)
			return t.exchange(ctx, base, src, req, "", resp)
		}
	}
	tok, err := src.Token(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	return t.exchange(ctx, base, src, req, tok, nil)
}

// exchange sends req with tok (unless resp is its answer already, sent
// without a token) and answers the challenges, sending it again.
func (t *Transport) exchange(ctx context.Context, base http.RoundTripper, src *Source, req *http.Request, tok string, resp *http.Response) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		if resp == nil {
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
					if err := src.SetAuthorization(&rc, tok); err != nil {
						closeBody(&rc)
						return nil, err
					}
				} else {
					delete(rc.Header, "Authorization")
				}
				r = &rc
			}
			var err error
			if resp, err = base.RoundTrip(r); err != nil {
				return nil, err
			}
			src.Observe(resp)
			if !challenged(resp) {
				if resp.StatusCode < 300 && tok != "" {
					src.Succeeded()
				}
				return resp, nil
			}
		}
		if attempt >= maxAuthRetries || !replayable(req) {
			return resp, nil
		}
		next, retry, aerr := src.Unauthorized(ctx, resp.StatusCode, resp.Header.Values("WWW-Authenticate"), tok)
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
		tok, resp = next, nil
	}
}

// challenged reports whether resp is a 401 or 403, which authorization
// may answer.
func challenged(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
}

// replayable reports whether req can be sent again: no body, or one
// GetBody can make anew.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
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
