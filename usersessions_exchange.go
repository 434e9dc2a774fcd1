package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/oauth"
)

// exchange makes a principal's token source get its tokens by RFC 8693
// token exchange of the principal's latest access token (the one its
// latest request carried), never by a browser.
func (c *userCreds) exchange(oc *oauth.Config) {
	oc.Grant = oauth.GrantTokenExchange
	oc.UserAgent = nil
	oc.SubjectToken = func(context.Context) (string, error) {
		if f := c.subject.Load(); f != nil {
			if t := (*f)(); t != "" {
				return t, nil
			}
		}
		return "", ErrNoSubjectToken
	}
}
