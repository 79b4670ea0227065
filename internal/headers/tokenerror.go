package headers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// fetchError turns a token request failure into a message that names the
// server and what went wrong but never includes the response body, which
// x/oauth2's RetrieveError.Error would.
func (s *tokenSource) fetchError(tokenURL string, err error) error {
	return tokenError(s.server, "OAuth token", tokenURL, err)
}

// tokenError is fetchError for any token request of server; kind names the
// request in the message ("OAuth token", "token exchange").
func tokenError(server, kind, tokenURL string, err error) error {
	prefix := fmt.Sprintf("MCP server '%s': ", server)
	var (
		missing *missingFieldError
		re      *oauth2.RetrieveError
		ue      *url.Error
	)
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("%s%s response missing '%s'", prefix, kind, missing.field)
	case errors.Is(err, errMalformedResponse):
		return fmt.Errorf("%s%s endpoint %s returned a response that is neither a JSON object nor form-encoded", prefix, kind, secret.RedactURL(tokenURL))
	case errors.As(err, &re):
		return refusedError(prefix+kind, tokenURL, re)
	case errors.As(err, &ue):
		return transportError(prefix+kind, tokenURL, ue.Err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s%s request to %s: %w", prefix, kind, secret.RedactURL(tokenURL), err)
	}
	// Anything else comes from x/oauth2 parsing, whose message may quote the body.
	return fmt.Errorf("%s%s request to %s failed", prefix, kind, secret.RedactURL(tokenURL))
}

// refusedError reports the token endpoint's refusal re with its HTTP status
// and its error code when that looks like one, never its body; what is the
// message's start ("MCP server 'x': OAuth token").
func refusedError(what, tokenURL string, re *oauth2.RetrieveError) error {
	msg := fmt.Sprintf("%s endpoint %s refused the request", what, secret.RedactURL(tokenURL))
	if re.Response != nil {
		msg += fmt.Sprintf(" (HTTP %d)", re.Response.StatusCode)
	}
	if code := SafeErrorCode(re.ErrorCode); code != "" {
		msg += ": " + code
	}
	return errors.New(msg)
}

// transportError reports the token request's failure inner (a url.Error's
// cause, which does not repeat the full URL), a timeout as one; what is the
// message's start.
func transportError(what, tokenURL string, inner error) error {
	if errors.Is(inner, context.DeadlineExceeded) {
		return fmt.Errorf("%s request to %s timed out after %s: %w", what, secret.RedactURL(tokenURL), tokenTimeout, inner)
	}
	return fmt.Errorf("%s request to %s failed: %w", what, secret.RedactURL(tokenURL), inner)
}

// errorCodeChars are the bytes SafeErrorCode lets through.
const errorCodeChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."

// SafeErrorCode returns an RFC 6749 error code if it looks like one (it is
// server-controlled text, so anything else is dropped).
func SafeErrorCode(code string) string {
	if code == "" || len(code) > 64 {
		return ""
	}
	for i := 0; i < len(code); i++ {
		if strings.IndexByte(errorCodeChars, code[i]) < 0 {
			return ""
		}
	}
	return code
}
