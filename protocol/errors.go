package protocol

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC 2.0 and MCP error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeResourceNotFound was returned by resources/read for an unknown
	// URI before SEP-2164, which makes servers answer CodeInvalidParams
	// instead. Clients should accept both.
	CodeResourceNotFound = -32002

	// CodeHeaderMismatch (2026-07-28): an HTTP header disagrees with the body.
	CodeHeaderMismatch = -32020
	// CodeMissingRequiredClientCapability (2026-07-28): the request needs a
	// client capability the client did not declare.
	CodeMissingRequiredClientCapability = -32021
	// CodeUnsupportedProtocolVersion (2026-07-28): the requested protocol
	// version is not supported; Data holds UnsupportedProtocolVersionData.
	CodeUnsupportedProtocolVersion = -32022
	// codeURLElicitationRequired (2025-11-25): the request needs the user to
	// complete a URL elicitation first.
	codeURLElicitationRequired = -32042
)

// Error is a JSON-RPC error object. It implements error, so a server's
// answer can be returned (and matched with errors.As) as is.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Data) > 0 && len(e.Data) <= 200 {
		return fmt.Sprintf("jsonrpc error %d: %s (data: %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// NewError returns an error object with the given code and message.
func NewError(code int64, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// UnsupportedProtocolVersionData is the data of a
// CodeUnsupportedProtocolVersion error.
type UnsupportedProtocolVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested,omitempty"`
}
