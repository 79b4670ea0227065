package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzPlainID: an id the fast path echoes raw must be one the SDK path
// echoes identically (it decodes ids to float64 or string and re-encodes
// them without HTML escaping).
func FuzzPlainID(f *testing.F) {
	for _, s := range []string{`1`, `-7`, `0`, `-0`, `123456789012345`, `1e3`, `1.0`, `"a"`, `"a\"b"`, `"<&>"`, `"\u00e9"`, `"é"`, `""`, `null`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		if !plainID(id) {
			return
		}
		var v any
		if err := json.Unmarshal(id, &v); err != nil {
			t.Fatalf("plainID(%s) but it does not decode: %v", id, err)
		}
		var out []byte
		switch v := v.(type) {
		case float64:
			out = strconv.AppendInt(nil, int64(v), 10)
		case string:
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(v)
			out = bytes.TrimRight(buf.Bytes(), "\n")
		default:
			t.Fatalf("plainID(%s): a %T", id, v)
		}
		if !bytes.Equal(out, id) {
			t.Fatalf("plainID(%s), but the SDK echoes %s", id, out)
		}
	})
}
