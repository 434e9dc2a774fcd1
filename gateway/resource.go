package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcpvisor/mcpvisor"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// DefaultAdminScope is the scope the admin actions need when the gateway
// validates access tokens (ResourceServer.AdminScope).
const DefaultAdminScope = "mcpvisor:admin"

// ProtectedResourcePath is where the gateway serves its protected
// resource metadata (RFC 9728 §3); the form suffixed with the MCP
// endpoint's path (ProtectedResourcePath+MCPPath) is served too.
const ProtectedResourcePath = "/.well-known/oauth-protected-resource"

// ErrInvalidToken is matched (errors.Is) by a TokenValidator's error for
// a token it refuses: the client is answered 401 with
// error="invalid_token".
var ErrInvalidToken = errors.New("gateway: invalid access token")

// ErrAuthUnavailable is matched by a TokenValidator's error when it
// could not decide (its authorization server is unreachable): the client
// is answered 503.
var ErrAuthUnavailable = errors.New("gateway: token validation unavailable")

// TokenValidator validates a bearer access token and returns the caller
// it names. package gateway/authn implements it (JWT and introspection).
// It is called concurrently, on the goroutines serving HTTP requests.
type TokenValidator interface {
	ValidateToken(ctx context.Context, token string) (Identity, error)
}

// ResourceServer makes the gateway an OAuth 2.1 resource server (the MCP
// authorization specification): every HTTP request needs an access
// token that Validator accepts, with Scopes for the MCP endpoint and
// AdminScope besides for the admin API (GET /status, /metrics, /events
// and every /admin/ path); the caller's Identity is in the context of
// the request's handlers (IdentityFrom). Options.Token, when also set,
// stays accepted and counts as the operator (every scope). Stdio is not
// concerned.
type ResourceServer struct {
	// Validator validates the tokens (required).
	Validator TokenValidator
	// Resource is the canonical URI of the MCP endpoint as clients reach
	// it (e.g. https://mcp.example.com/mcp): the "resource" of the
	// protected resource metadata, and where its URL is derived from
	// (required).
	Resource string
	// AuthorizationServers are the issuers clients may get tokens from
	// (the metadata's authorization_servers; at least one).
	AuthorizationServers []string
	// Scopes are the scopes every request needs (none when empty).
	Scopes []string
	// AdminScope is the scope the admin API needs besides (default
	// DefaultAdminScope).
	AdminScope string
	// ResourceName is the metadata's resource_name (optional).
	ResourceName string
	// AdminTools are path.Match globs of the qualified names of pool
	// tools that act as admin actions (the management tools): a caller
	// whose token lacks AdminScope gets a JSON-RPC error for them
	// (CodeInsufficientScope). None when empty.
	AdminTools []string
}

// CodeInsufficientScope is the JSON-RPC error code of a tools/call of
// an admin tool (ResourceServer.AdminTools) by a caller whose token
// lacks the admin scope.
const CodeInsufficientScope = -32041

// operatorKey marks a request admitted by the static Options.Token,
// which holds every scope.
type operatorKey struct{}

// adminTool refuses a call of one of ResourceServer.AdminTools (qualified
// name) by a caller whose token lacks the admin scope; nil otherwise
// (no resource server, stdio, the static token, or the scope held).
func (f *front) adminTool(ctx context.Context, qualified string) *protocol.Error {
	p := f.rs
	if p == nil || len(p.AdminTools) == 0 || ctx.Value(operatorKey{}) != nil {
		return nil
	}
	id, ok := IdentityFrom(ctx)
	if !ok { // not over HTTP
		return nil
	}
	for _, glob := range p.AdminTools {
		if m, _ := path.Match(glob, qualified); m {
			if slices.Contains(id.Scopes, p.AdminScope) {
				return nil
			}
			return errorf(CodeInsufficientScope, "tool %q needs scope %q, which the access token lacks", qualified, p.AdminScope)
		}
	}
	return nil
}

// protectedResource is a resource server's derived, fixed state.
type protectedResource struct {
	ResourceServer
	metadataURL string // the path-suffixed metadata URL of Resource
	document    []byte // the metadata, JSON
}

// validate reports a ResourceServer that cannot work (Options.Validate):
// no Validator, a Resource that is not an absolute http(s) URL, no
// authorization server, or a bad AdminTools glob.
func (rs *ResourceServer) validate() error {
	if rs == nil {
		return nil
	}
	if rs.Validator == nil {
		return fmt.Errorf("%w: ResourceServer needs a Validator", ErrInvalidOptions)
	}
	if u, err := url.Parse(rs.Resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%w: ResourceServer.Resource %q is not an absolute http(s) URL without fragment", ErrInvalidOptions, rs.Resource)
	}
	if len(rs.AuthorizationServers) == 0 {
		return fmt.Errorf("%w: ResourceServer needs an authorization server", ErrInvalidOptions)
	}
	for _, g := range rs.AdminTools {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: bad admin tools glob %q: %v", ErrInvalidOptions, g, err)
		}
	}
	return nil
}

// refuseAll is the validator of a ResourceServer set without one: the
// gateway fails closed.
type refuseAll struct{}

func (refuseAll) ValidateToken(context.Context, string) (Identity, error) {
	return Identity{}, fmt.Errorf("%w: no token validator is configured", ErrAuthUnavailable)
}

// newProtectedResource derives what the guard needs from rs (nil when rs
// is nil). Without a Validator every token is refused (503): a resource
// server configured by halves fails closed.
func newProtectedResource(rs *ResourceServer) *protectedResource {
	if rs == nil {
		return nil
	}
	p := &protectedResource{ResourceServer: *rs}
	if p.Validator == nil {
		p.Validator = refuseAll{}
	}
	if p.AdminScope == "" {
		p.AdminScope = DefaultAdminScope
	}
	u, err := url.Parse(p.Resource)
	if err == nil && u.Host != "" {
		p.metadataURL = u.Scheme + "://" + u.Host + ProtectedResourcePath + strings.TrimSuffix(u.EscapedPath(), "/")
	}
	supported := slices.Clone(p.Scopes)
	if !slices.Contains(supported, p.AdminScope) {
		supported = append(supported, p.AdminScope)
	}
	doc := map[string]any{
		"resource":                 p.Resource,
		"authorization_servers":    p.AuthorizationServers,
		"scopes_supported":         supported,
		"bearer_methods_supported": []string{"header"},
	}
	if p.ResourceName != "" {
		doc["resource_name"] = p.ResourceName
	}
	p.document, _ = json.Marshal(doc)
	return p
}

// serveMetadata answers the protected resource metadata (RFC 9728 §3.2).
func (p *protectedResource) serveMetadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(p.document)
}

// isMetadataPath reports whether path is one of the metadata paths, which
// need no token.
func isMetadataPath(path string) bool {
	return path == ProtectedResourcePath || strings.HasPrefix(path, ProtectedResourcePath+"/")
}

// isAdminPath reports whether path belongs to the admin API, which
// needs the admin scope.
func isAdminPath(path string) bool {
	switch path {
	case "/status", "/metrics", "/events":
		return true
	}
	return strings.HasPrefix(path, "/admin/")
}

// challenge writes a 401 or 403 answer with its WWW-Authenticate header
// (RFC 6750 §3, RFC 9728 §5.1): resource_metadata always; errCode
// ("invalid_token", "insufficient_scope") and scope when given.
func (p *protectedResource) challenge(w http.ResponseWriter, status int, errCode, desc string, scopes []string) {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata=`)
	b.WriteString(strconv.Quote(p.metadataURL))
	if errCode != "" {
		b.WriteString(`, error="` + errCode + `"`)
	}
	if desc != "" {
		b.WriteString(`, error_description=`)
		b.WriteString(strconv.Quote(strings.Map(descChar, desc)))
	}
	if len(scopes) > 0 {
		b.WriteString(`, scope=`)
		b.WriteString(strconv.Quote(strings.Join(scopes, " ")))
	}
	w.Header().Set("WWW-Authenticate", b.String())
	msg := "unauthorized: a valid bearer token is required"
	if status == http.StatusForbidden {
		msg = "forbidden: the token lacks scope " + strings.Join(scopes, " ")
	}
	httpError(w, status, msg)
}

// descChar keeps error_description within the characters RFC 6750 §3
// allows (printable ASCII but '"' and '\\').
func descChar(r rune) rune {
	if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
		return '?'
	}
	return r
}

// authenticate runs the resource server's checks on r (no Part login or
// public page stands for a token here) and returns the request to serve,
// with the caller's Identity in its context, or nil once it has answered.
func (f *front) authenticate(w http.ResponseWriter, r *http.Request) *http.Request {
	p := f.rs
	tok, hasBearer := bearerToken(r)
	if !hasBearer {
		if !isMCPPath(r.URL.Path) && f.partAdmits(r) {
			if f.partLogin(r) {
				// A Part's login was had for the static token: the
				// operator, as the token itself.
				return r.WithContext(context.WithValue(staticIdentity(r.Context()), operatorKey{}, true))
			}
			return r
		}
		f.metrics.rejected.Add(1)
		p.challenge(w, http.StatusUnauthorized, "", "", p.Scopes)
		return nil
	}
	if f.opts.Token != "" && f.bearerOK(r) {
		return r.WithContext(context.WithValue(staticIdentity(r.Context()), operatorKey{}, true))
	}
	id, err := p.Validator.ValidateToken(r.Context(), tok)
	if err != nil {
		f.metrics.rejected.Add(1)
		if errors.Is(err, ErrAuthUnavailable) {
			f.log.Warn().Err(err).Msg("cannot validate an access token")
			httpError(w, http.StatusServiceUnavailable, "service unavailable: the access token cannot be validated now")
			return nil
		}
		f.log.Debug().Err(err).Msg("access token refused")
		p.challenge(w, http.StatusUnauthorized, "invalid_token", err.Error(), nil)
		return nil
	}
	need := p.Scopes
	if isAdminPath(r.URL.Path) {
		need = append(slices.Clone(need), p.AdminScope)
	}
	for _, s := range need {
		if !slices.Contains(id.Scopes, s) {
			f.metrics.rejected.Add(1)
			p.challenge(w, http.StatusForbidden, "insufficient_scope", "", need)
			return nil
		}
	}
	ctx := WithIdentity(r.Context(), id)
	if pr, ok := id.principal(tok); ok {
		ctx = mcpvisor.WithPrincipal(ctx, pr) // userauth.go: per-user upstream credentials
	}
	return r.WithContext(ctx)
}

// staticIdentity marks ctx as that of a request admitted by the static
// Options.Token, which names nobody: the zero Identity, unless the host
// established one before the gateway's handler (a middleware of its
// own), which is kept.
func staticIdentity(ctx context.Context) context.Context {
	if _, ok := IdentityFrom(ctx); ok {
		return ctx
	}
	return WithIdentity(ctx, Identity{})
}

// bearerToken returns the token of r's "Authorization: Bearer" header
// (the scheme is case-insensitive, RFC 6750 §2.1).
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "Bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(h[7:])
	return tok, tok != ""
}
