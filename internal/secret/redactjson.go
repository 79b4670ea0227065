package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// MaxRedactDepth bounds the nesting RedactJSON walks; deeper documents are
// refused (ErrRedact), not truncated.
const MaxRedactDepth = 32

// ErrRedact reports a document RedactJSON does not return: not JSON, nested
// deeper than MaxRedactDepth, or larger than its bound once redacted.
var ErrRedact = errors.New("not redactable: invalid, too deep or too large")

// sensitiveKeys are the member names (lower case, without '_' and '-')
// whose values RedactJSON replaces whatever they hold.
var sensitiveKeys = []string{"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey",
	"privatekey", "authorization", "auth", "cookie", "credential", "signature", "sessionid", "pin", "otp"}

// SensitiveKey reports whether a JSON member name names a credential: its
// lower-cased form without '_' and '-' is, ends with or contains one of
// password, secret, token, apikey, …; "auth", "pin" and "otp" only whole
// or as a suffix ("oauth", "x_auth", "user_pin"), so "author" is kept.
func SensitiveKey(name string) bool {
	k := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name))
	for _, s := range sensitiveKeys {
		switch s {
		case "auth", "pin", "otp":
			if strings.HasSuffix(k, s) {
				return true
			}
		default:
			if strings.Contains(k, s) {
				return true
			}
		}
	}
	return false
}

// RedactJSON returns a copy of the JSON document raw fit to record: every
// member whose name is a SensitiveKey has its value replaced by Redacted,
// and every string has the values sc knows scrubbed (sc may be nil). It
// returns ErrRedact for a document that is not valid JSON, nests deeper
// than MaxRedactDepth, or is longer than max bytes once redacted.
func RedactJSON(raw []byte, sc *Scrubber, max int) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	r := redactor{dec: dec, sc: sc, max: max}
	if err := r.value(0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrRedact
	}
	return r.out.Bytes(), nil
}

// redactor writes a redacted copy of one document as it reads it.
type redactor struct {
	dec *json.Decoder
	sc  *Scrubber
	max int
	out bytes.Buffer
}

// value copies the next value at depth d.
func (r *redactor) value(d int) error {
	if d > MaxRedactDepth || r.out.Len() > r.max {
		return ErrRedact
	}
	tok, err := r.dec.Token()
	if err != nil {
		return ErrRedact
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return r.object(d)
		}
		if t == '[' {
			return r.array(d)
		}
		return ErrRedact
	case string:
		return r.write(r.sc.Scrub(t))
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return ErrRedact
		}
		r.out.Write(b)
		return nil
	}
}

// object copies an object's members (its '{' read), redacting sensitive ones.
func (r *redactor) object(d int) error {
	r.out.WriteByte('{')
	for first := true; r.dec.More(); first = false {
		tok, err := r.dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return ErrRedact
		}
		if !first {
			r.out.WriteByte(',')
		}
		if err := r.write(r.sc.Scrub(name)); err != nil {
			return err
		}
		r.out.WriteByte(':')
		if SensitiveKey(name) {
			var skip json.RawMessage
			if r.dec.Decode(&skip) != nil {
				return ErrRedact
			}
			r.out.WriteString(`"` + Redacted + `"`)
			continue
		}
		if err := r.value(d + 1); err != nil {
			return err
		}
	}
	return r.close('}')
}

// array copies an array's elements (its '[' read).
func (r *redactor) array(d int) error {
	r.out.WriteByte('[')
	for first := true; r.dec.More(); first = false {
		if !first {
			r.out.WriteByte(',')
		}
		if err := r.value(d + 1); err != nil {
			return err
		}
	}
	return r.close(']')
}

// close reads the closing delimiter and writes it.
func (r *redactor) close(delim byte) error {
	if _, err := r.dec.Token(); err != nil {
		return ErrRedact
	}
	r.out.WriteByte(delim)
	if r.out.Len() > r.max {
		return ErrRedact
	}
	return nil
}

// write appends s as a JSON string.
func (r *redactor) write(s string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return ErrRedact
	}
	r.out.Write(b)
	return nil
}
