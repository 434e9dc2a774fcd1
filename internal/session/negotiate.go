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

// negotiate settles the protocol era, following the spec's backward
// compatibility rules: ask server/discover first (2026-07-28); a
// stateless-era answer, or an UnsupportedProtocolVersion error naming a
// stateless version, stays in that era; any other error or silence past
// the probe timeout falls back to initialize at the newest handshake
// version the server accepts.
func (s *Session) negotiate(ctx context.Context) error {
	want := s.opts.ProtocolVersion
	if want != "" && !protocol.IsSupported(want) {
		return fmt.Errorf("%w: version %q is not one mcpvisor speaks (%v)", ErrVersionMismatch, want, protocol.SupportedVersions())
	}
	initVersion := protocol.LatestHandshakeVersion
	if want != "" && !protocol.UsesDiscover(want) {
		initVersion = want
	} else if !s.opts.Memory.DiscoverRejected() {
		version := protocol.LatestVersion
		if want != "" {
			version = want
		}
		legacy, err := s.discover(ctx, version)
		if err == nil {
			return nil
		}
		if legacy == "" {
			return err // the connection failed, or a pinned stateless version was refused
		}
		if s.discoverRejected && s.opts.Memory != nil {
			s.opts.Memory.discoverRejected.Store(true)
		}
		initVersion = legacy
	}
	return s.initialize(ctx, initVersion)
}

// discover probes with server/discover at version. It returns nil when
// the session is negotiated; otherwise the handshake version to fall back
// to (empty when there is no falling back) and why discover failed.
func (s *Session) discover(ctx context.Context, version string) (fallback string, err error) {
	pinned := s.opts.ProtocolVersion != ""
	for attempt := 0; attempt < 2; attempt++ {
		meta := s.metaFor(version)
		timeout := s.opts.DiscoverTimeout
		if timeout <= 0 {
			timeout = defaultDiscoverTimeout
		}
		s.setTransportVersion(version)
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
				s.discoverRejected = true
				return s.legacyFallback(pinned, chosen, fmt.Errorf("%w: server/discover offers %v", ErrVersionMismatch, res.SupportedVersions))
			}
			s.version = chosen
			s.setTransportVersion(chosen)
			s.capabilities = res.Capabilities
			s.instructions = res.Instructions
			s.hints.Discover = protocol.HintOf(res.TTLMs, res.CacheScope)
			res.Meta.Get(protocol.MetaServerInfo, &s.serverInfo)
			s.modernMeta = s.metaFor(chosen)
			if s.modernMetaJSON, err = json.Marshal(s.modernMeta); err != nil {
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
			s.discoverRejected = true
			return s.legacyFallback(pinned, next, err)
		}
		// Method not found, invalid params, "not initialized", silence: a
		// server of the handshake eras.
		s.discoverRejected = true
		s.log.Debug().Err(err).Msg("server/discover rejected; falling back to initialize")
		return s.legacyFallback(pinned, "", err)
	}
	s.discoverRejected = true
	return s.legacyFallback(pinned, "", err)
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

func (s *Session) legacyFallback(pinned bool, offered string, cause error) (string, error) {
	if pinned {
		return "", fmt.Errorf("%w: the server refused pinned version %s: %w", ErrVersionMismatch, s.opts.ProtocolVersion, cause)
	}
	if offered != "" && protocol.IsSupported(offered) && !protocol.UsesDiscover(offered) {
		return offered, cause
	}
	return protocol.LatestHandshakeVersion, cause
}

// initialize runs the handshake at version and checks the version the
// server chose.
func (s *Session) initialize(ctx context.Context, version string) error {
	s.setTransportVersion("")
	var res protocol.InitializeResult
	params := protocol.InitializeParams{
		ProtocolVersion: version,
		Capabilities:    s.opts.Capabilities,
		ClientInfo:      s.opts.ClientInfo,
	}
	if err := s.Call(ctx, protocol.MethodInitialize, params, &res); err != nil {
		return err
	}
	if !protocol.IsSupported(res.ProtocolVersion) || protocol.UsesDiscover(res.ProtocolVersion) {
		return fmt.Errorf("%w: the server answered initialize with version %q; mcpvisor speaks %v",
			ErrVersionMismatch, res.ProtocolVersion, protocol.SupportedVersions())
	}
	if s.opts.ProtocolVersion != "" && res.ProtocolVersion != s.opts.ProtocolVersion {
		return fmt.Errorf("%w: pinned %s, the server chose %s", ErrVersionMismatch, s.opts.ProtocolVersion, res.ProtocolVersion)
	}
	s.version = res.ProtocolVersion
	s.setTransportVersion(res.ProtocolVersion)
	s.capabilities = res.Capabilities
	s.serverInfo = res.ServerInfo
	s.instructions = res.Instructions
	return s.Notify(ctx, protocol.NotificationInitialized, nil)
}

// metaFor builds the stateless-era _meta members for version.
func (s *Session) metaFor(version string) protocol.Meta {
	rm := protocol.RequestMeta{
		ProtocolVersion:    version,
		ClientInfo:         s.opts.ClientInfo,
		ClientCapabilities: s.opts.Capabilities,
	}
	return rm.Apply(nil)
}
