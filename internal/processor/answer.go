package processor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Answer is a processor's answer, decoded and checked (DecodeAnswer).
type Answer struct {
	Action string `json:"action"`
	// Reason is the deny's reason, cleaned (CleanReason).
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// payload is a's mutation for phase; nil unless a mutates.
func (a Answer) payload(phase string) json.RawMessage {
	switch {
	case a.Action != Mutate:
		return nil
	case phase == Request:
		return a.Arguments
	}
	return a.Result
}

// errMalformed is the error of an answer that is not one JSON object of
// the contract's members; it quotes nothing of the answer.
var errMalformed = errors.New(`answered something other than {"action": "pass" | "deny" | "mutate", "reason"?, "arguments"? | "result"?}`)

// DecodeAnswer decodes a processor's answer to a request of phase,
// strictly: one JSON object, nested at most MaxDepth levels, with only the
// members of the contract; action pass, deny or mutate; a mutate carries
// the payload of its phase (arguments: a JSON object; result: a valid
// CallToolResult) and no other, pass and deny carry none. The reason is
// cleaned (CleanReason). Its errors quote nothing of data.
func DecodeAnswer(data []byte, phase string) (Answer, error) {
	if wire.TooDeepAt(data, MaxDepth) >= 0 {
		return Answer{}, fmt.Errorf("answered JSON nested deeper than %d levels", MaxDepth)
	}
	var a Answer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Answer{}, errMalformed
	}
	if _, err := dec.Token(); err != io.EOF {
		return Answer{}, errMalformed // trailing data
	}
	a.Reason = CleanReason(a.Reason)
	args, res := present(a.Arguments), present(a.Result)
	switch a.Action {
	case Pass, Deny:
		if args || res {
			return Answer{}, fmt.Errorf("answered %q with a payload; only mutate carries one", a.Action)
		}
		a.Arguments, a.Result = nil, nil
		return a, nil
	case Mutate:
		return a, checkMutation(a, phase, args, res)
	}
	return Answer{}, errors.New(`answered an action other than "pass", "deny" or "mutate"`)
}

// present reports whether a member was given (null counts as absent).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// checkMutation checks a mutate's payload for phase.
func checkMutation(a Answer, phase string, args, res bool) error {
	if phase == Request {
		switch {
		case res || !args:
			return errors.New(`answered "mutate" in the request phase without "arguments" (or with "result")`)
		case !isObject(a.Arguments):
			return errors.New(`answered "mutate" with "arguments" that are not a JSON object`)
		}
		return nil
	}
	switch {
	case args || !res:
		return errors.New(`answered "mutate" in the response phase without "result" (or with "arguments")`)
	}
	if err := CheckResult(a.Result); err != nil {
		return fmt.Errorf(`answered "mutate" with a "result" that is not a valid CallToolResult: %w`, err)
	}
	return nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// CleanReason is s as a tool error, log line or record may show it:
// control and format characters and invalid UTF-8 removed, at most
// MaxReason bytes (cut on a rune boundary).
func CleanReason(s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > MaxReason {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// The members of a CallToolResult and of its content blocks.
var (
	resultMembers = map[string]bool{"content": true, "structuredContent": true, "isError": true, "_meta": true, "resultType": true}
	blockRequired = map[string][]string{
		"text":          {"text"},
		"image":         {"data", "mimeType"},
		"audio":         {"data", "mimeType"},
		"resource_link": {"uri", "name"},
		"resource":      {"resource"},
	}
)

// CheckResult reports why raw is not a valid CallToolResult: an object
// with a "content" array of content blocks (text, image, audio,
// resource_link, resource, each with its required string members),
// "structuredContent" an object, "isError" a boolean, "_meta" an object,
// "resultType" (2026-07-28) "complete", and nothing else.
func CheckResult(raw json.RawMessage) error {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(raw, &r); err != nil || r == nil {
		return errors.New("not a JSON object")
	}
	for k := range r {
		if !resultMembers[k] {
			return errors.New("a member other than content, structuredContent, isError, _meta and resultType")
		}
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(r["content"], &blocks); err != nil || blocks == nil {
		return errors.New(`"content" is not an array of objects`)
	}
	for i, b := range blocks {
		if err := checkBlock(b); err != nil {
			return fmt.Errorf("content[%d]: %w", i, err)
		}
	}
	if v, ok := r["structuredContent"]; ok && !isObject(v) {
		return errors.New(`"structuredContent" is not an object`)
	}
	if v, ok := r["isError"]; ok && string(v) != "true" && string(v) != "false" {
		return errors.New(`"isError" is not a boolean`)
	}
	if v, ok := r["_meta"]; ok && !isObject(v) {
		return errors.New(`"_meta" is not an object`)
	}
	if v, ok := r["resultType"]; ok && string(v) != `"complete"` {
		return errors.New(`"resultType" is not "complete"`)
	}
	return nil
}

// checkBlock checks one content block's type and required members.
func checkBlock(b map[string]json.RawMessage) error {
	var typ string
	if b == nil || json.Unmarshal(b["type"], &typ) != nil {
		return errors.New(`no string "type"`)
	}
	req, ok := blockRequired[typ]
	if !ok {
		return errors.New("a block of a type other than text, image, audio, resource_link and resource")
	}
	for _, k := range req {
		if k == "resource" {
			if err := checkEmbedded(b[k]); err != nil {
				return err
			}
			continue
		}
		var s string
		if json.Unmarshal(b[k], &s) != nil {
			return fmt.Errorf("%s block without a string %q", typ, k)
		}
	}
	return nil
}

// checkEmbedded checks an embedded resource: a "uri" and a string "text"
// or "blob".
func checkEmbedded(raw json.RawMessage) error {
	var r struct {
		URI  *string `json:"uri"`
		Text *string `json:"text"`
		Blob *string `json:"blob"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &r) != nil || r.URI == nil || (r.Text == nil) == (r.Blob == nil) {
		return errors.New(`resource block without a "resource" of a string "uri" and one of "text" or "blob"`)
	}
	return nil
}
