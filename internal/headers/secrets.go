package headers

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// ParseSecrets decodes the inbound secrets carrier: a JSON object of string →
// string, given either as JSON text or as base64 (standard or URL alphabet,
// padded or not) of that text. An empty value yields a nil map and no error.
//
// Errors name headerName and what is wrong, never any part of the value: not
// a key, not a fragment, not a decoder message that might quote a byte.
func ParseSecrets(headerName, value string) (map[string]string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	text, err := secretsText(headerName, value)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(text, &obj); err != nil || obj == nil {
		// The decoder's message can quote input bytes, so it is dropped.
		return nil, fmt.Errorf("secrets header %q must hold a JSON object (as JSON text or base64 of it)", headerName)
	}
	return stringMembers(headerName, obj)
}

// secretsText returns the JSON text of a non-empty secrets carrier value:
// the value itself when it looks like JSON, else its base64 decoding.
func secretsText(headerName, value string) ([]byte, error) {
	text := []byte(value)
	if value[0] == '{' || json.Valid(text) {
		return text, nil
	}
	decoded, ok := decodeBase64(value)
	if !ok {
		return nil, fmt.Errorf("secrets header %q is neither a JSON object nor base64 of one", headerName)
	}
	return decoded, nil
}

// stringMembers returns obj as a map of strings, refusing any other value.
func stringMembers(headerName string, obj map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("secrets header %q must map names to strings, but a value is not a string", headerName)
		}
		out[k] = s
	}
	return out, nil
}

// decodeBase64 tries the four base64 variants a client might reasonably use.
func decodeBase64(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}
