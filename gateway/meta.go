package gateway

import "github.com/mcpvisor/mcpvisor/protocol"

// ownedMeta are the _meta keys of a downstream request the gateway does
// not pass upstream, because it sets them itself on its own request to
// the server: the progress token (the supervisor's, routed back to the
// client's) and the stateless era's protocol keys, which describe the
// gateway's own connection to that server (the version it negotiated,
// its client info, the capabilities and log level it declares).
var ownedMeta = [...]string{
	protocol.MetaProgressToken,
	protocol.MetaProtocolVersion,
	protocol.MetaClientInfo,
	protocol.MetaClientCapabilities,
	protocol.MetaLogLevel,
}

// eraMeta are the stateless era's protocol keys of a request's _meta:
// mcpserver reads them into the Request (its era, client info,
// capabilities and log level), and the gateway sets its own upstream.
var eraMeta = [...]string{
	protocol.MetaProtocolVersion,
	protocol.MetaClientInfo,
	protocol.MetaClientCapabilities,
	protocol.MetaLogLevel,
}

// isEraMeta reports whether key is one of eraMeta.
func isEraMeta(key []byte) bool {
	for _, k := range eraMeta {
		if string(key) == k {
			return true
		}
	}
	return false
}

// forwardedMeta returns the members of a downstream request's _meta that
// go upstream with it: every key the caller set but those the gateway
// owns (ownedMeta). It returns nil when none is left, and never changes
// m.
func forwardedMeta(m protocol.Meta) protocol.Meta {
	n := len(m)
	for _, k := range ownedMeta {
		if _, ok := m[k]; ok {
			n--
		}
	}
	if n == 0 {
		return nil
	}
	out := make(protocol.Meta, n)
	for k, v := range m {
		out[k] = v
	}
	for _, k := range ownedMeta {
		delete(out, k)
	}
	return out
}
