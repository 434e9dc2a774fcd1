// Package channels implements the host side of Claude Code's channel
// extension for mcpvisor: channel messages that servers push into a
// session, the permission relay that forwards tool-approval prompts to
// channel servers under short IDs, and bounded per-subscriber inboxes
// (a queue per server in each) that never block the code that publishes
// into them and count every message they drop.
//
// The wire contract (code.claude.com/docs/en/channels-reference):
//
//   - A server that declares capabilities.experimental["claude/channel"]
//     may send notifications/claude/channel {content, meta}; meta is a map
//     of string attributes. The host shows it to its model as
//     <channel source="SERVER" k="v">content</channel>.
//   - A server that also declares
//     capabilities.experimental["claude/channel/permission"] receives
//     notifications/claude/channel/permission_request {request_id,
//     tool_name, description, input_preview} from the host when a tool
//     needs approval, and answers with notifications/claude/channel/permission
//     {request_id, behavior: "allow"|"deny"}. request_id is five lowercase
//     letters from a–z without "l". Whichever answer arrives first (a
//     channel's, or the host's own) applies.
//
// The package knows only the protocol package: it does no I/O and starts
// no goroutines; its types are safe for concurrent use.
package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// The capability keys a channel server declares under
// capabilities.experimental.
const (
	// CapabilityChannel: the server pushes channel messages.
	CapabilityChannel = "claude/channel"
	// CapabilityPermission: the server relays permission prompts.
	CapabilityPermission = "claude/channel/permission"
)

// Message is one channel message, as a subscriber receives it.
type Message struct {
	// Seq numbers the messages a Hub accepted, from 1, in the order it
	// accepted them.
	Seq uint64 `json:"seq"`
	// Time is when the hub accepted the message.
	Time time.Time `json:"time"`
	// Server is the configured name of the server that sent it: the
	// channel's source.
	Server string `json:"server"`
	// Content is the message body, as the server sent it.
	Content string `json:"content"`
	// Meta holds the message's attributes, keys already sanitized (see
	// SanitizeMeta).
	Meta map[string]string `json:"meta,omitempty"`
	// Dropped is set on delivery from an inbox: how many messages of the
	// same server the inbox dropped (its queue was full) since it last
	// delivered one of that server's. Zero when nothing was lost.
	Dropped uint64 `json:"dropped,omitempty"`
}

// NotificationParams is the params of notifications/claude/channel.
type NotificationParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// ErrMalformed: a notification's params could not be read.
var ErrMalformed = errors.New("channels: malformed notification")

// Parse reads the params of a notifications/claude/channel from server.
// Meta values that are not strings (numbers, booleans) are kept as their
// JSON text; keys are sanitized (SanitizeMeta).
func Parse(server string, params json.RawMessage) (Message, error) {
	var p struct {
		Content json.RawMessage            `json:"content"`
		Meta    map[string]json.RawMessage `json:"meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	m := Message{Server: server}
	if len(p.Content) > 0 && json.Unmarshal(p.Content, &m.Content) != nil {
		m.Content = string(p.Content) // structured content: keep its JSON text
	}
	if len(p.Meta) > 0 {
		meta := make(map[string]string, len(p.Meta))
		for k, raw := range p.Meta {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw)
			}
			meta[k] = s
		}
		m.Meta = SanitizeMeta(meta)
	}
	return m, nil
}

// SanitizeMeta returns the meta entries that can be rendered as
// attributes: keys that are identifiers (ASCII letters, digits and
// underscores, not starting with a digit), as Claude Code accepts them;
// other keys are dropped, as Claude Code drops them. The key "source" is
// dropped too: the source attribute names the server, and a server
// cannot claim to be another. Values are kept (Render escapes them).
// Nil when nothing is left.
func SanitizeMeta(meta map[string]string) map[string]string {
	var out map[string]string
	for k, v := range meta {
		if !isIdentifier(k) || k == "source" {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(meta))
		}
		out[k] = v
	}
	return out
}

func isIdentifier(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Render shows a message the way a model sees it:
//
//	<channel source="SERVER" k="v">content</channel>
//
// with the meta attributes sorted by key. Attribute values and content
// are escaped (& < > " ' and, in attributes, line breaks and tabs), so
// that nothing a server sends can close the tag or add attributes;
// invalid UTF-8 becomes U+FFFD. Keys are sanitized as by SanitizeMeta.
func Render(m Message) string {
	meta := SanitizeMeta(m.Meta)
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.Grow(len(m.Content) + len(m.Server) + 32)
	b.WriteString(`<channel source="`)
	escape(&b, m.Server, true)
	b.WriteByte('"')
	for _, k := range keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteString(`="`)
		escape(&b, meta[k], true)
		b.WriteByte('"')
	}
	b.WriteByte('>')
	escape(&b, m.Content, false)
	b.WriteString("</channel>")
	return b.String()
}

// escape writes s to b with the XML special characters as entities. In
// an attribute, line breaks and tabs become character references too.
func escape(b *strings.Builder, s string, attr bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&#39;")
		case attr && r == '\n':
			b.WriteString("&#10;")
		case attr && r == '\r':
			b.WriteString("&#13;")
		case attr && r == '\t':
			b.WriteString("&#9;")
		default:
			b.WriteRune(r)
		}
	}
}
