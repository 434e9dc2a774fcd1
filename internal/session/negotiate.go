package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// negotiation settles a session's protocol era and fills in what the
// server said of itself (Session.peer, the stateless-era _meta, the
// discover caching hint). It runs once, on Open's goroutine, before the
// session is returned; nothing reads what it writes until then but the
// requests it sends itself.
type negotiation struct {
	s    *Session
	opts *Options
}

// run settles the protocol era, following the spec's backward
// compatibility rules: ask server/discover first (2026-07-28); a
// stateless-era answer, or an UnsupportedProtocolVersion error naming a
// stateless version, stays in that era; any other error or silence past
// the probe timeout falls back to initialize at the newest handshake
// version the server accepts.
func (n negotiation) run(ctx context.Context) error {
	peer := &n.s.peer
	want := n.opts.ProtocolVersion
	if want != "" && !protocol.IsSupported(want) {
		return fmt.Errorf("%w: version %q is not one mcpvisor speaks (%v)", ErrVersionMismatch, want, protocol.SupportedVersions())
	}
	initVersion := protocol.LatestHandshakeVersion
	if want != "" && !protocol.UsesDiscover(want) {
		initVersion = want
	} else if !n.opts.Memory.DiscoverRejected() {
		version := protocol.LatestVersion
		if want != "" {
			version = want
		}
		legacy, err := n.discover(ctx, version)
		if err == nil {
			return nil
		}
		if legacy == "" {
			return err // the connection failed, or a pinned stateless version was refused
		}
		if peer.DiscoverRejected && n.opts.Memory != nil {
			n.opts.Memory.discoverRejected.Store(true)
		}
		initVersion = legacy
	}
	return n.initialize(ctx, initVersion)
}

// discover probes with server/discover at version. It returns nil when
// the session is negotiated; otherwise the handshake version to fall back
// to (empty when there is no falling back) and why discover failed.
func (n negotiation) discover(ctx context.Context, version string) (fallback string, err error) {
	s, peer := n.s, &n.s.peer
	pinned := n.opts.ProtocolVersion != ""
	for attempt := 0; attempt < 2; attempt++ {
		meta := n.metaFor(version)
		timeout := n.opts.DiscoverTimeout
		if timeout <= 0 {
			timeout = defaultDiscoverTimeout
		}
		n.setTransportVersion(version)
		var res protocol.DiscoverResult
		// The probe's deadline is the server's silence after the request
		// went out: an authorization its 401 started (over HTTP, part of
		// sending) does not count against it.
		err = s.callAnsweredWithin(ctx, timeout, protocol.MethodDiscover, protocol.DiscoverParams{Meta: meta}, &res)
		if err == nil && len(res.SupportedVersions) == 0 {
			// Not a DiscoverResult (supportedVersions is required): a
			// server that answers every unknown method with an empty
			// result. It speaks the handshake eras.
			err = fmt.Errorf("%w: server/discover answered without supportedVersions", ErrMalformedResponse)
		}
		if err == nil {
			chosen := version
			if len(res.SupportedVersions) > 0 && !slices.Contains(res.SupportedVersions, version) {
				chosen = protocol.Negotiate(res.SupportedVersions)
			}
			if !protocol.UsesDiscover(chosen) {
				// Discover answered but offers no stateless version we
				// speak: negotiate through the handshake instead.
				peer.DiscoverRejected = true
				return n.legacyFallback(pinned, chosen, fmt.Errorf("%w: server/discover offers %v", ErrVersionMismatch, res.SupportedVersions))
			}
			peer.Version = chosen
			n.setTransportVersion(chosen)
			peer.Capabilities = res.Capabilities
			peer.Instructions = res.Instructions
			s.lists.setHint(protocol.MethodDiscover, protocol.HintOf(res.TTLMs, res.CacheScope))
			res.Meta.Get(protocol.MetaServerInfo, &peer.Info)
			s.meta.modern = n.metaFor(chosen)
			if s.meta.modernJSON, err = json.Marshal(s.meta.modern); err != nil {
				return "", err
			}
			return "", nil
		}
		if errors.Is(err, ErrConnectionClosed) || ctx.Err() != nil {
			return "", err // the connection or the connect deadline ended: nothing to fall back on
		}
		if unreached(err) {
			// The probe did not reach a server that could answer it (a
			// stateless-era server restarting refuses connections too):
			// the connect fails, and nothing is learned about the era.
			return "", err
		}
		var rpcErr *protocol.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeUnsupportedProtocolVersion {
			var data protocol.UnsupportedProtocolVersionData
			_ = json.Unmarshal(rpcErr.Data, &data)
			next := protocol.Negotiate(data.Supported)
			if protocol.UsesDiscover(next) && attempt == 0 && (next == version || !pinned) {
				// A stateless version we both speak: ask again with it,
				// once (SEP-2575). That may be the version just refused:
				// a server (or an intermediary) may reject a request
				// whose version it lists, and the retry is what the
				// revision asks of the client, not a fall back to
				// initialize, which such a server does not speak.
				version = next
				continue
			}
			peer.DiscoverRejected = true
			return n.legacyFallback(pinned, next, err)
		}
		// Method not found, invalid params, "not initialized", silence: a
		// server of the handshake eras.
		peer.DiscoverRejected = true
		s.core.log.Debug().Err(err).Msg("server/discover rejected; falling back to initialize")
		return n.legacyFallback(pinned, "", err)
	}
	peer.DiscoverRejected = true
	return n.legacyFallback(pinned, "", err)
}

// unreached reports whether a request failed without the server
// answering it: nothing listens, the connection broke, TLS or name
// resolution failed, credentials are missing, or the server failed (5xx,
// 429). Silence within a live connection (the probe's own timeout) and
// other refusals (4xx, a JSON-RPC error) are answers of a kind.
func unreached(err error) bool {
	switch transports.Classify(err) {
	case transports.ClassRefused, transports.ClassReset, transports.ClassDNS, transports.ClassTLS,
		transports.ClassAuth, transports.ClassHTTP5xx, transports.ClassConfig:
		return true
	}
	return false
}

func (n negotiation) legacyFallback(pinned bool, offered string, cause error) (string, error) {
	if pinned {
		return "", fmt.Errorf("%w: the server refused pinned version %s: %w", ErrVersionMismatch, n.opts.ProtocolVersion, cause)
	}
	if offered != "" && protocol.IsSupported(offered) && !protocol.UsesDiscover(offered) {
		return offered, cause
	}
	return protocol.LatestHandshakeVersion, cause
}

// initialize runs the handshake at version and checks the version the
// server chose.
func (n negotiation) initialize(ctx context.Context, version string) error {
	s, peer := n.s, &n.s.peer
	n.setTransportVersion("")
	var res protocol.InitializeResult
	params := protocol.InitializeParams{
		ProtocolVersion: version,
		Capabilities:    n.opts.Capabilities,
		ClientInfo:      n.opts.ClientInfo,
	}
	if err := s.Call(ctx, protocol.MethodInitialize, params, &res); err != nil {
		return err
	}
	if !protocol.IsSupported(res.ProtocolVersion) || protocol.UsesDiscover(res.ProtocolVersion) {
		return fmt.Errorf("%w: the server answered initialize with version %q; mcpvisor speaks %v",
			ErrVersionMismatch, res.ProtocolVersion, protocol.SupportedVersions())
	}
	if n.opts.ProtocolVersion != "" && res.ProtocolVersion != n.opts.ProtocolVersion {
		return fmt.Errorf("%w: pinned %s, the server chose %s", ErrVersionMismatch, n.opts.ProtocolVersion, res.ProtocolVersion)
	}
	peer.Version = res.ProtocolVersion
	n.setTransportVersion(res.ProtocolVersion)
	peer.Capabilities = res.Capabilities
	peer.Info = res.ServerInfo
	peer.Instructions = res.Instructions
	return s.core.notify(ctx, protocol.NotificationInitialized, nil)
}

// metaFor builds the stateless-era _meta members for version.
func (n negotiation) metaFor(version string) protocol.Meta {
	rm := protocol.RequestMeta{
		ProtocolVersion:    version,
		ClientInfo:         n.opts.ClientInfo,
		ClientCapabilities: n.opts.Capabilities,
	}
	return rm.Apply(nil)
}

// setTransportVersion tells a transport that carries the version out of
// band (HTTP headers) which version the next requests speak.
func (n negotiation) setTransportVersion(version string) {
	if vs, ok := n.s.core.conn.(transports.VersionSetter); ok {
		vs.SetProtocolVersion(version)
	}
}
