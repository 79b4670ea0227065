// Package wire decodes and encodes the JSON-RPC 2.0 envelope on mcp-mux's hot path.
//
// The go-sdk decodes every message through a decoder that allocates a 32 KiB
// buffer, twice per message. The tools/call fast path only needs the envelope
// (id, method, params or result) to route a call, so it decodes that with
// segmentio/encoding's allocation-light Unmarshal and leaves params and
// results as raw bytes that travel unchanged between the two sides, including
// the progress, log messages and server-to-client requests written on a
// fast-path call's own stream. Everything else (initialize, notifications,
// batches, server-to-client requests outside a call) stays with the SDK.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	sjson "github.com/segmentio/encoding/json"
)

// Message is a decoded JSON-RPC envelope. Params, Result and ID stay raw.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	return "jsonrpc error " + strconv.FormatInt(e.Code, 10) + ": " + e.Message
}

// ErrNotEnvelope reports bytes that are not a single JSON-RPC 2.0 message.
var ErrNotEnvelope = errors.New("not a JSON-RPC 2.0 message")

// Decode decodes one JSON-RPC message. It rejects batches, anything without
// the "2.0" version tag, and (with ErrTooDeep) anything nested deeper than
// MaxDepth. Params, Result and Error.Data of a decoded message are within
// the bound too.
func Decode(data []byte, m *Message) error {
	*m = Message{}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return ErrNotEnvelope
	}
	if _, err := Scan(data); err != nil {
		return err
	}
	if err := sjson.Unmarshal(data, m); err != nil {
		return err
	}
	if m.JSONRPC != "2.0" {
		return ErrNotEnvelope
	}
	if m.ID != nil && string(m.ID) == "null" {
		m.ID = nil
	}
	return nil
}

// IsCall reports whether m is a request that expects a response.
func (m *Message) IsCall() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m is a response (result or error).
func (m *Message) IsResponse() bool { return m.Method == "" && m.ID != nil }

// CallParams is the part of tools/call params that routing reads.
type CallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      json.RawMessage `json:"_meta,omitempty"`
}

// DecodeCallParams decodes tools/call params (of a message Decode
// accepted, or otherwise checked with Scan).
func DecodeCallParams(data []byte, p *CallParams) error {
	*p = CallParams{}
	if len(data) == 0 {
		return errors.New("missing params")
	}
	return sjson.Unmarshal(data, p)
}

// AppendCallParams appends encoded tools/call params.
func AppendCallParams(dst []byte, name string, args, meta json.RawMessage) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, name)
	if len(args) > 0 {
		dst = append(dst, `,"arguments":`...)
		dst = append(dst, args...)
	} else {
		dst = append(dst, `,"arguments":{}`...)
	}
	if len(meta) > 0 {
		dst = append(dst, `,"_meta":`...)
		dst = append(dst, meta...)
	}
	return append(dst, '}')
}

// AppendRequest appends an encoded request.
func AppendRequest(dst []byte, id json.RawMessage, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendResult appends an encoded response carrying result.
func AppendResult(dst []byte, id json.RawMessage, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendError appends an encoded error response as go-sdk encodes it: a
// null id when id is nil or not valid JSON, the message without HTML escapes, and data when
// there is any.
func AppendError(dst []byte, id json.RawMessage, code int64, msg string, data json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if id == nil || !json.Valid(id) {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, code, 10)
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, msg)
	if len(data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, data...)
	}
	return append(dst, "}}"...)
}

// ToolError returns a CallToolResult with isError set and one text block.
func ToolError(text string) json.RawMessage {
	b := make([]byte, 0, len(text)+48)
	b = append(b, `{"content":[{"type":"text","text":`...)
	b = appendJSONString(b, text)
	return append(b, `}],"isError":true}`...)
}

// IsToolError reports whether a raw CallToolResult is a tool error
// (isError), as an upstream or ToolError wrote it: a result's own text
// holds the mark only escaped.
func IsToolError(raw []byte) bool { return bytes.Contains(raw, toolErrorMark) }

var toolErrorMark = []byte(`"isError":true`)

// AppendNotification appends an encoded notification.
func AppendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = appendJSONString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}
