package transports

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// More errors a transport returns. Test with errors.Is.
var (
	// ErrSessionExpired means a Streamable HTTP server answered 404 to a
	// request carrying its session id: the session is gone and the
	// request was not processed. The connection is closed; a new one (a
	// new initialize) is needed, and the request may be retried on it.
	ErrSessionExpired = errors.New("transport: the server's session expired (HTTP 404)")

	// ErrStreamBroken means the stream that was to carry a request's
	// response ended before the response, and could not be resumed. The
	// request may or may not have been processed.
	ErrStreamBroken = errors.New("transport: response stream ended before the response")
)

// RequestError fails one request without ending the connection. A
// transport that learns a request cannot be answered (its response stream
// broke, or the server rejected the POST that carried it) delivers one
// through Receiver.FrameError, so the waiting call ends at once.
type RequestError struct {
	ID  protocol.ID // the JSON-RPC id of the failed request
	Err error
}

func (e *RequestError) Error() string {
	id, _ := e.ID.MarshalJSON()
	return fmt.Sprintf("transport: request %s: %v", id, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// HTTPStatusError is an HTTP response with a status the transport could
// not use. Body holds the start of the response body (up to 1 KiB), which
// often says why.
type HTTPStatusError struct {
	Method     string // the HTTP method of the request
	StatusCode int
	Body       []byte
	// RetryAfter is the server's Retry-After header, verbatim, if any.
	RetryAfter string
	// WWWAuthenticate is the server's WWW-Authenticate header on a 401 or
	// 403, verbatim, for the authorization layer.
	WWWAuthenticate string
}

func (e *HTTPStatusError) Error() string {
	msg := fmt.Sprintf("transport: HTTP %s answered %d %s", e.Method, e.StatusCode, http.StatusText(e.StatusCode))
	if len(e.Body) > 0 {
		msg += ": " + string(e.Body)
	}
	return msg
}

// maxErrorBody bounds the body quoted by an HTTPStatusError.
const maxErrorBody = 1 << 10

// NewHTTPStatusError builds an HTTPStatusError from a response, reading
// (and quoting) at most 1 KiB of its body, with what the request carried
// that may be secret (RequestSecrets: an error page may quote the
// request) replaced by Scrubbed. It does not close the body.
func NewHTTPStatusError(resp *http.Response) *HTTPStatusError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	body = Scrub(body, RequestSecrets(resp.Request))
	method := ""
	if resp.Request != nil {
		method = resp.Request.Method
	}
	return &HTTPStatusError{
		Method:          method,
		StatusCode:      resp.StatusCode,
		Body:            body,
		RetryAfter:      resp.Header.Get("Retry-After"),
		WWWAuthenticate: resp.Header.Get("WWW-Authenticate"),
	}
}

// Class is the kind of a connection failure, which the supervisor uses to
// choose between retrying, re-authorizing and parking a server.
type Class int

// The failure classes, from Classify.
const (
	ClassNone           Class = iota // no error
	ClassOther                       // none of the below
	ClassClosed                      // the connection ended (EOF, process exit, ErrClosed)
	ClassRefused                     // nothing listens at the address (ECONNREFUSED)
	ClassReset                       // the peer reset or broke the connection (ECONNRESET, EPIPE, unexpected EOF)
	ClassTimeout                     // a deadline passed (dial, TLS handshake, response)
	ClassDNS                         // the host name does not resolve
	ClassTLS                         // the TLS handshake or certificate check failed
	ClassAuth                        // HTTP 401 or 403: credentials missing, expired or insufficient
	ClassSessionExpired              // HTTP 404 on a known session (ErrSessionExpired)
	ClassHTTP4xx                     // another 4xx: the request or the config is wrong
	ClassHTTP5xx                     // a 5xx or 429: the server is failing or overloaded
	ClassConfig                      // the config cannot work (bad URL, missing command, unreadable CA file)
	ClassCanceled                    // the caller's context was cancelled
)

var classNames = [...]string{"none", "other", "closed", "refused", "reset", "timeout", "dns", "tls", "auth",
	"session-expired", "http-4xx", "http-5xx", "config", "canceled"}

func (c Class) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Transient reports whether a failure of this class may go away by itself,
// so that retrying (with backoff) makes sense.
func (c Class) Transient() bool {
	switch c {
	case ClassClosed, ClassRefused, ClassReset, ClassTimeout, ClassDNS, ClassHTTP5xx, ClassSessionExpired, ClassOther:
		return true
	}
	return false
}

// ConfigError reports a transport config that cannot work, such as an
// unparsable URL or an unreadable certificate file. Retrying does not help.
type ConfigError struct {
	Err error
}

func (e *ConfigError) Error() string { return "transport config: " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Classify names the kind of a transport failure.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	var status *HTTPStatusError
	var cfgErr *ConfigError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrSessionExpired):
		return ClassSessionExpired
	case errors.As(err, &status):
		switch {
		case status.StatusCode == http.StatusUnauthorized || status.StatusCode == http.StatusForbidden:
			return ClassAuth
		case status.StatusCode == http.StatusTooManyRequests || status.StatusCode >= 500:
			return ClassHTTP5xx
		default:
			return ClassHTTP4xx
		}
	case errors.As(err, &cfgErr):
		return ClassConfig
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.As(err, &dnsErr):
		return ClassDNS
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalidCert):
		return ClassTLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrStreamBroken):
		return ClassReset
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout
	case errors.Is(err, ErrClosed), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return ClassClosed
	}
	return ClassOther
}

// VersionSetter is implemented by transports that carry the negotiated
// protocol version outside the messages (Streamable HTTP's
// MCP-Protocol-Version header). The session calls it before the first
// request at a version (server/discover) and once negotiation settles.
type VersionSetter interface {
	SetProtocolVersion(version string)
}
