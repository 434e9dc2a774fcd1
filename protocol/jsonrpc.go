// Package protocol holds the JSON-RPC 2.0 and MCP wire types for every
// protocol era mcpvisor speaks, the method names, the version table and its
// negotiation rules, and the error codes.
//
// It is pure data: no I/O, no goroutines, no global state beyond constant
// tables. Everything above it (transports, sessions, actors) shares these
// types, so a frame decoded once is never decoded again by another layer.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// jsonrpcVersion is the only value the "jsonrpc" member may take.
const jsonrpcVersion = "2.0"

// Decoding errors. Each is wrapped with detail; test with errors.Is.
var (
	// ErrParse means the frame is not valid JSON.
	ErrParse = errors.New("protocol: frame is not valid JSON")
	// ErrBatch means the frame is a JSON array. Batches existed only in
	// 2025-03-26 and no server may send one to a client of a later era; a
	// batch is rejected as a whole rather than half-processed.
	ErrBatch = errors.New("protocol: JSON-RPC batches are not supported")
	// ErrInvalidMessage means the frame is JSON but not a JSON-RPC 2.0
	// request, notification or response.
	ErrInvalidMessage = errors.New("protocol: not a JSON-RPC 2.0 message")
)

// ID is a JSON-RPC request ID: an integer or a string. The zero ID is "no
// ID" (a notification, or the null ID of an error response to an
// unparseable request). IDs are comparable and usable as map keys.
type ID struct {
	str  string
	num  int64
	kind idKind
}

type idKind uint8

const (
	idNone idKind = iota
	idNum
	idStr
)

// Int64ID returns the integer ID n.
func Int64ID(n int64) ID { return ID{num: n, kind: idNum} }

// StringID returns the string ID s.
func StringID(s string) ID { return ID{str: s, kind: idStr} }

// IsZero reports whether the ID is absent (or null).
func (id ID) IsZero() bool { return id.kind == idNone }

// Int64 returns the ID's integer value and whether it is an integer ID.
func (id ID) Int64() (int64, bool) { return id.num, id.kind == idNum }

// String renders the ID as it appears on the wire, or "null".
func (id ID) String() string {
	switch id.kind {
	case idNum:
		return strconv.FormatInt(id.num, 10)
	case idStr:
		return strconv.Quote(id.str)
	}
	return "null"
}

// MarshalJSON encodes the ID as a JSON number, string or null.
func (id ID) MarshalJSON() ([]byte, error) { return id.appendJSON(nil), nil }

func (id ID) appendJSON(b []byte) []byte {
	switch id.kind {
	case idNum:
		return strconv.AppendInt(b, id.num, 10)
	case idStr:
		return appendJSONString(b, id.str)
	}
	return append(b, "null"...)
}

// UnmarshalJSON accepts an integer, a string or null. MCP requires request
// IDs to be strings or integers, so fractional or exponent numbers are
// rejected rather than rounded (rounding could answer the wrong request).
func (id *ID) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return fmt.Errorf("%w: empty id", ErrInvalidMessage)
	case string(data) == "null":
		*id = ID{}
		return nil
	case data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("%w: id: %v", ErrInvalidMessage, err)
		}
		*id = StringID(s)
		return nil
	}
	n, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: id %s is neither an integer nor a string", ErrInvalidMessage, truncate(data, 40))
	}
	*id = Int64ID(n)
	return nil
}

// Kind classifies a decoded message.
type Kind uint8

// The kinds of JSON-RPC message.
const (
	KindRequest      Kind = iota + 1 // has method and id
	KindNotification                 // has method, no id
	KindResponse                     // has result or error, and an id (null only with an error)
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Message is one decoded JSON-RPC 2.0 message. Params, Result and the
// error's Data are kept as raw JSON so that each layer decodes only what it
// needs, in the goroutine that needs it.
type Message struct {
	Kind   Kind
	ID     ID
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// wireMessage is the union of all members a JSON-RPC message may carry.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *ID             `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *Error          `json:"error"`
}

// Decode parses one frame. It rejects batches (ErrBatch), invalid JSON
// (ErrParse) and JSON that is not a JSON-RPC 2.0 message (ErrInvalidMessage).
// The returned message does not alias data.
//
// Well-formed frames take a fast path that slices the envelope's members
// out of the frame without reflection; anything unusual (escaped keys or
// method names, members of the wrong type) is decoded by encoding/json,
// which also words the error.
func Decode(data []byte) (*Message, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrParse)
	}
	switch data[0] {
	case '[':
		return nil, ErrBatch
	case '{':
	default:
		return nil, fmt.Errorf("%w: frame starts with %q", ErrParse, truncate(data, 20))
	}
	var inline [8]memberSpan
	if spans, ok := validate(data, inline[:0]); ok {
		var w wireMessage
		var id ID
		if hasID, ok := scanEnvelope(data, spans, &w, &id); ok {
			if !hasID {
				return w.messageWithID(nil)
			}
			return w.messageWithID(&id)
		}
	}
	return decodeSlow(data)
}

// decodeSlow decodes with encoding/json. It is the reference the fast
// path must agree with (see FuzzDecode).
func decodeSlow(data []byte) (*Message, error) {
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("%w: %v", ErrParse, err)
		}
		if errors.Is(err, ErrInvalidMessage) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	return w.message()
}

// message validates a decoded envelope and classifies it.
func (w *wireMessage) message() (*Message, error) { return w.messageWithID(w.ID) }

// messageWithID is message with the id (nil: none) passed apart from w,
// so that Decode's id stays on its stack.
func (w *wireMessage) messageWithID(id *ID) (*Message, error) {
	if w.JSONRPC != jsonrpcVersion {
		return nil, fmt.Errorf("%w: jsonrpc member is %q, want %q", ErrInvalidMessage, w.JSONRPC, jsonrpcVersion)
	}
	m := &Message{Method: w.Method, Params: nullToNil(w.Params), Result: w.Result, Error: w.Error}
	if id != nil {
		m.ID = *id
	}
	switch {
	case w.Method != "":
		if w.Result != nil || w.Error != nil {
			return nil, fmt.Errorf("%w: message has both method and result/error", ErrInvalidMessage)
		}
		if id == nil {
			m.Kind = KindNotification
		} else {
			if m.ID.IsZero() {
				return nil, fmt.Errorf("%w: request %q has a null id", ErrInvalidMessage, w.Method)
			}
			m.Kind = KindRequest
		}
	case w.Error != nil:
		if w.Result != nil {
			return nil, fmt.Errorf("%w: response has both result and error", ErrInvalidMessage)
		}
		m.Kind = KindResponse
	case w.Result != nil:
		if m.ID.IsZero() {
			return nil, fmt.Errorf("%w: result without an id", ErrInvalidMessage)
		}
		m.Kind = KindResponse
	default:
		return nil, fmt.Errorf("%w: neither method, result nor error", ErrInvalidMessage)
	}
	return m, nil
}

// scanEnvelope extracts the envelope members of a valid JSON object,
// whose members validate located, without reflection. It reports false
// when the frame needs encoding/json: an escaped or non-ASCII key, an
// escaped or non-string method, a jsonrpc member other than the literal
// "2.0", a malformed id or error. Params and result are copied, so the
// result does not alias data.
//
// w and id are the caller's locals, so that decoding allocates only the
// message and one copy of params and result. The id goes to *id, and
// hasID reports a non-null one (w.ID is left nil).
func scanEnvelope(data []byte, spans []memberSpan, w *wireMessage, id *ID) (hasID, ok bool) {
	var params, result []byte
	for _, m := range spans {
		key := data[m.key+1 : m.keyEnd-1]
		for _, c := range key {
			if c == '\\' || c >= 0x80 {
				return false, false
			}
		}
		v := data[m.value:m.end]
		switch string(key) {
		case "jsonrpc":
			if string(v) != `"2.0"` {
				return false, false
			}
			w.JSONRPC = jsonrpcVersion
		case "id":
			if string(v) == "null" {
				hasID = false
				break
			}
			if v[0] == '"' {
				if _, esc := stringEnd(v, 0); esc {
					return false, false
				}
				*id = StringID(string(v[1 : len(v)-1]))
			} else if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				*id = Int64ID(n)
			} else {
				return false, false
			}
			hasID = true
		case "method":
			if v[0] != '"' {
				return false, false
			}
			if _, esc := stringEnd(v, 0); esc {
				return false, false
			}
			w.Method = string(v[1 : len(v)-1])
		case "params":
			params = v
		case "result":
			result = v
		case "error":
			if string(v) == "null" {
				w.Error = nil
				break
			}
			var e Error
			if json.Unmarshal(v, &e) != nil {
				return false, false
			}
			w.Error = &e
		default:
			// encoding/json matches member names case-insensitively; let it
			// decide about near-misses such as "ID" so both paths agree.
			for _, name := range envelopeMembers {
				if bytes.EqualFold(key, name) {
					return false, false
				}
			}
		}
	}
	if params != nil || result != nil {
		buf := make([]byte, 0, len(params)+len(result))
		if params != nil {
			buf = append(buf, params...)
			w.Params = buf[:len(params):len(params)]
		}
		if result != nil {
			buf = append(buf, result...)
			w.Result = buf[len(buf)-len(result):]
		}
	}
	return hasID, true
}

var envelopeMembers = [][]byte{[]byte("jsonrpc"), []byte("id"), []byte("method"), []byte("params"), []byte("result"), []byte("error")}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at
// data[i] (a quote), and whether its text needs decoding (escapes, or
// bytes outside ASCII, which encoding/json checks for valid UTF-8); -1 if
// unterminated. The string must be valid (validJSON checked it): the byte
// after a backslash is skipped unseen.
func stringEnd(data []byte, i int) (int, bool) { return stringEndFrom(data, i+1, false) }

// stringEndFrom is stringEnd resumed at data[j], inside the string;
// special is what stringEnd would have said of the bytes before j.
func stringEndFrom(data []byte, j int, special bool) (int, bool) {
	for {
		k, high := quoteOrEscape(data, j)
		special = special || high
		if k >= len(data) {
			return -1, special
		}
		if data[k] == '"' {
			return k + 1, special
		}
		special = true
		j = k + 2
	}
}

// valueEnd returns the index just past the JSON value starting at data[i]
// (valid JSON is assumed), or -1.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		end, _ := stringEnd(data, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, _ := stringEnd(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ']' &&
		data[j] != ' ' && data[j] != '\t' && data[j] != '\n' && data[j] != '\r' {
		j++
	}
	return j
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// AppendRequest appends the encoding of a request (or, with a zero id, a
// notification) to b. params may be nil, a json.RawMessage, or any value
// encoding/json accepts.
func AppendRequest(b []byte, id ID, method string, params any) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0",`...)
	if !id.IsZero() {
		b = append(b, `"id":`...)
		b = id.appendJSON(b)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = appendJSONString(b, method)
	var err error
	if b, err = appendMember(b, "params", params); err != nil {
		return nil, fmt.Errorf("protocol: encoding %s params: %w", method, err)
	}
	return append(b, '}'), nil
}

// AppendResult appends a success response to request id.
func AppendResult(b []byte, id ID, result any) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = id.appendJSON(b)
	if result == nil {
		result = json.RawMessage("{}")
	}
	var err error
	if b, err = appendMember(b, "result", result); err != nil {
		return nil, fmt.Errorf("protocol: encoding result: %w", err)
	}
	return append(b, '}'), nil
}

// AppendError appends an error response to request id (zero id = null).
func AppendError(b []byte, id ID, e *Error) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = id.appendJSON(b)
	var err error
	if b, err = appendMember(b, "error", e); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// Encode encodes m; it is the inverse of Decode for valid messages.
func Encode(m *Message) ([]byte, error) {
	switch m.Kind {
	case KindRequest, KindNotification:
		var params any
		if m.Params != nil {
			params = m.Params
		}
		return AppendRequest(nil, m.ID, m.Method, params)
	case KindResponse:
		if m.Error != nil {
			return AppendError(nil, m.ID, m.Error)
		}
		return AppendResult(nil, m.ID, m.Result)
	}
	return nil, fmt.Errorf("%w: kind %d", ErrInvalidMessage, m.Kind)
}

// ValidJSON is an encoded value its producer guarantees to be valid JSON
// (typically assembled from parts that were validated or encoded by
// encoding/json). The Append functions copy it without re-validating it,
// which matters on the per-call hot path.
type ValidJSON []byte

func appendMember(b []byte, name string, v any) ([]byte, error) {
	if v == nil {
		return b, nil
	}
	if raw, ok := v.(ValidJSON); ok {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		return append(b, raw...), nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if raw == nil {
			return b, nil
		}
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s is not valid JSON", name)
		}
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		return append(b, raw...), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return append(b, enc...), nil
}

// AppendString appends s encoded as a JSON string, as encoding/json
// encodes it.
func AppendString(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendJSONString appends s as a JSON string. Method names and IDs are
// almost always plain ASCII, so the common case avoids encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			enc, _ := json.Marshal(s) // cannot fail for a string
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
