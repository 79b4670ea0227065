package headers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
)

// maxTokenResponse bounds how much of a token response is read (x/oauth2 reads 1 MiB too).
const maxTokenResponse = 1 << 20

// responseFields are the configured names of the token response fields.
type responseFields struct{ token, tokenType, expiresIn string }

// newResponseFields returns the configured field names, the standard one
// for each left empty.
func newResponseFields(token, tokenType, expiresIn string) responseFields {
	f := responseFields{token, tokenType, expiresIn}
	if f.token == "" {
		f.token = "access_token"
	}
	if f.tokenType == "" {
		f.tokenType = "token_type"
	}
	if f.expiresIn == "" {
		f.expiresIn = "expires_in"
	}
	return f
}

// errMalformedResponse: a 2xx token response that is neither JSON nor form-encoded.
var errMalformedResponse = errors.New("malformed token response")

// missingFieldError: a 2xx token response without a usable token field.
type missingFieldError struct{ field string }

// Error implements error.
func (e *missingFieldError) Error() string {
	return fmt.Sprintf("OAuth token response missing '%s'", e.field)
}

// normalizingTransport sits under x/oauth2 on the token request. x/oauth2
// does the request (grant, client authentication, auth-style probing) and
// parses error responses, but it only knows the standard field names, rejects
// a non-integer expires_in, and would quote an unparsable body in its errors.
// So each successful response is rewritten here into a standard JSON token
// response: the configured token, token type and expires-in fields become
// access_token, token_type and expires_in (DeerFlow's rules: a missing or
// non-integer expires_in is dropped, so the default applies), and a response
// without a token becomes a missingFieldError instead of reaching x/oauth2.
type normalizingTransport struct {
	base   http.RoundTripper // nil = http.DefaultTransport
	fields responseFields
}

var _ http.RoundTripper = (*normalizingTransport)(nil)

// RoundTrip implements http.RoundTripper: it sends req and rewrites a 2xx
// answer into a standard token response.
func (t *normalizingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the token response: %w", err)
	}
	out, err := t.fields.normalize(resp.Header.Get("Content-Type"), body)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	return resp, nil
}

// normalize rewrites a successful token response (JSON, or form-encoded as
// x/oauth2 also accepts) into standard JSON.
func (f responseFields) normalize(contentType string, body []byte) ([]byte, error) {
	get, err := responseGetter(contentType, body)
	if err != nil {
		return nil, err
	}
	// An error code in a 2xx answer is passed on for x/oauth2 to report.
	if code := stringValue(get("error")); code != "" {
		return json.Marshal(map[string]any{"error": code})
	}
	tok := stringValue(get(f.token))
	if tok == "" {
		return nil, &missingFieldError{f.token}
	}
	out := map[string]any{"access_token": tok}
	setString(out, "token_type", get(f.tokenType))
	if n, ok := intValue(get(f.expiresIn)); ok {
		out["expires_in"] = n
	}
	setString(out, "refresh_token", get("refresh_token"))
	return json.Marshal(out)
}

// stringValue returns v when it is a string, else "".
func stringValue(v any) string {
	s, _ := v.(string)
	return s
}

// setString sets out[k] to v when v is a non-empty string.
func setString(out map[string]any, k string, v any) {
	if s := stringValue(v); s != "" {
		out[k] = s
	}
}

// responseGetter returns a lookup of the token response body's fields,
// form-encoded or JSON as its content type says.
func responseGetter(contentType string, body []byte) (func(string) any, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" || mt == "text/plain" {
		return formGetter(body)
	}
	return jsonGetter(body)
}

// formGetter returns a lookup of a form-encoded body's fields; a field that
// is absent is nil.
func formGetter(body []byte) (func(string) any, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errMalformedResponse
	}
	return func(k string) any {
		if !vals.Has(k) {
			return nil
		}
		return vals.Get(k)
	}, nil
}

// jsonGetter returns a lookup of the members of body, one JSON object
// (numbers as json.Number) and nothing after it.
func jsonGetter(body []byte) (func(string) any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errMalformedResponse
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errMalformedResponse // trailing data
	}
	return func(k string) any { return obj[k] }, nil
}

// intValue reads expires_in the way DeerFlow's int() does: a JSON integer, a
// number (truncated) or a decimal string; anything else is not a value.
func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		return numberValue(x)
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// numberValue reads a JSON number as an integer, truncating one with a
// fraction or exponent that a float64 holds exactly.
func numberValue(x json.Number) (int64, bool) {
	if n, err := x.Int64(); err == nil {
		return n, true
	}
	if f, err := x.Float64(); err == nil && !math.IsInf(f, 0) && math.Abs(f) < 1<<53 {
		return int64(f), true
	}
	return 0, false
}
