package protocol

import "encoding/json"

// Implementation names a client or server program.
type Implementation struct {
	Name       string `json:"name"`
	Title      string `json:"title,omitempty"`
	Version    string `json:"version"`
	WebsiteURL string `json:"websiteUrl,omitempty"`
	Icons      []Icon `json:"icons,omitempty"`
}

// Icon is an image a client may show for a server, tool, resource or prompt.
type Icon struct {
	Src      string   `json:"src"`
	MimeType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}

// ClientCapabilities is what a client declares it can do.
type ClientCapabilities struct {
	Roots        *RootsCapability           `json:"roots,omitempty"`
	Sampling     *json.RawMessage           `json:"sampling,omitempty"`
	Elicitation  *json.RawMessage           `json:"elicitation,omitempty"`
	Tasks        *json.RawMessage           `json:"tasks,omitempty"`
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
	// Extensions declares the extensions the client supports (2026-07-28,
	// SEP-2133), by identifier, e.g. ExtensionTasks.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// RootsCapability declares roots support.
type RootsCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ServerCapabilities is what a server declares it offers.
type ServerCapabilities struct {
	Tools        *ListChangedCapability     `json:"tools,omitempty"`
	Resources    *ResourcesCapability       `json:"resources,omitempty"`
	Prompts      *ListChangedCapability     `json:"prompts,omitempty"`
	Logging      *json.RawMessage           `json:"logging,omitempty"`
	Completions  *json.RawMessage           `json:"completions,omitempty"`
	Tasks        *json.RawMessage           `json:"tasks,omitempty"`
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
	// Extensions declares the extensions the server offers (2026-07-28,
	// SEP-2133), by identifier, with their settings.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// ListChangedCapability declares a feature and whether the server sends
// list_changed notifications for it.
type ListChangedCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ResourcesCapability declares resources support.
type ResourcesCapability struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// InitializeParams opens a session in the handshake eras (2024-11-05 …
// 2025-11-25).
type InitializeParams struct {
	Meta            Meta               `json:"_meta,omitempty"`
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ClientCapabilities `json:"capabilities"`
	ClientInfo      Implementation     `json:"clientInfo"`
}

// InitializeResult answers initialize.
type InitializeResult struct {
	Meta            Meta               `json:"_meta,omitempty"`
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

// DiscoverParams asks a stateless-era server what it supports. Its _meta
// carries the protocol version, client info and capabilities like every
// request of that era.
type DiscoverParams struct {
	Meta Meta `json:"_meta,omitempty"`
}

// DiscoverResult answers server/discover (2026-07-28).
type DiscoverResult struct {
	Meta              Meta               `json:"_meta,omitempty"`
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
	TTLMs             *int64             `json:"ttlMs,omitempty"`
	CacheScope        string             `json:"cacheScope,omitempty"`
}

// RequestMeta is the _meta every stateless-era request carries in place of
// the session state a handshake would have established.
type RequestMeta struct {
	ProtocolVersion    string
	ClientInfo         Implementation
	ClientCapabilities ClientCapabilities
}

// Apply adds the stateless-era members to m (allocating it when nil) and
// returns it. Members the caller already set are kept.
func (r *RequestMeta) Apply(m Meta) Meta {
	if m == nil {
		m = Meta{}
	}
	if _, ok := m[MetaProtocolVersion]; !ok {
		_ = m.Set(MetaProtocolVersion, r.ProtocolVersion)
	}
	if _, ok := m[MetaClientInfo]; !ok {
		_ = m.Set(MetaClientInfo, r.ClientInfo)
	}
	if _, ok := m[MetaClientCapabilities]; !ok {
		_ = m.Set(MetaClientCapabilities, r.ClientCapabilities)
	}
	return m
}

// PaginatedParams is the params of every list request.
type PaginatedParams struct {
	Meta   Meta   `json:"_meta,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// PingParams is the (empty) params of ping.
type PingParams struct {
	Meta Meta `json:"_meta,omitempty"`
}

// CancelledParams is the params of notifications/cancelled.
type CancelledParams struct {
	RequestID ID     `json:"requestId"`
	Reason    string `json:"reason,omitempty"`
}

// ProgressParams is the params of notifications/progress. Token is a string
// or an integer, kept raw so that it compares exactly.
type ProgressParams struct {
	Meta          Meta            `json:"_meta,omitempty"`
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         *float64        `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// LoggingLevel is a syslog severity name.
type LoggingLevel string

// The logging levels, least severe first.
const (
	LevelDebug     LoggingLevel = "debug"
	LevelInfo      LoggingLevel = "info"
	LevelNotice    LoggingLevel = "notice"
	LevelWarning   LoggingLevel = "warning"
	LevelError     LoggingLevel = "error"
	LevelCritical  LoggingLevel = "critical"
	LevelAlert     LoggingLevel = "alert"
	LevelEmergency LoggingLevel = "emergency"
)

// Valid reports whether l is one of the eight logging levels.
func (l LoggingLevel) Valid() bool {
	switch l {
	case LevelDebug, LevelInfo, LevelNotice, LevelWarning, LevelError, LevelCritical, LevelAlert, LevelEmergency:
		return true
	}
	return false
}

// SetLevelParams is the params of logging/setLevel.
type SetLevelParams struct {
	Level LoggingLevel `json:"level"`
}

// LoggingMessageParams is the params of notifications/message.
type LoggingMessageParams struct {
	Meta   Meta            `json:"_meta,omitempty"`
	Level  LoggingLevel    `json:"level"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data"`
}

// ResourceUpdatedParams is the params of notifications/resources/updated.
type ResourceUpdatedParams struct {
	Meta Meta   `json:"_meta,omitempty"`
	URI  string `json:"uri"`
}
