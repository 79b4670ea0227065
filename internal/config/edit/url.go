package edit

import (
	"net/url"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// URL credentials: a server's url, oauth.token_url and token_exchange.token_url
// are shown as written except for the credentials they may carry — the user
// info (https://user:pass@host, or a token as the user name) and the values
// of query parameters under a sensitive key (?api_key=…) — which read "***".
// A PUT that sends back the masked URL of the stored one keeps the stored
// URL; one with a masked part anywhere else is refused, never written.

// urlText is a URL as written, split where masking looks: everything up to
// the user info, the user info ("" for none, at reports whether there is
// an "@"), the rest of the authority and the path, the query parameters,
// and the fragment with its '#'.
type urlText struct {
	head, userinfo, rest, fragment string
	at, query                      bool
	params                         []string // "key=value" or "key", as written
}

// splitURL splits s; ok is false for text without "://" (a $VAR
// placeholder, a relative reference), which masking leaves alone.
func splitURL(s string) (u urlText, ok bool) {
	i := strings.Index(s, "://")
	if i < 0 {
		return u, false
	}
	u.head, s = s[:i+3], s[i+3:]
	if j := strings.IndexByte(s, '#'); j >= 0 {
		s, u.fragment = s[:j], s[j:]
	}
	if j := strings.IndexByte(s, '?'); j >= 0 {
		var q string
		s, q, u.query = s[:j], s[j+1:], true
		u.params = strings.Split(q, "&")
	}
	authEnd := strings.IndexAny(s, "/")
	if authEnd < 0 {
		authEnd = len(s)
	}
	if at := strings.LastIndexByte(s[:authEnd], '@'); at >= 0 {
		u.userinfo, u.at, s = s[:at], true, s[at+1:]
	}
	u.rest = s
	return u, true
}

// String is the URL as written.
func (u urlText) String() string {
	var b strings.Builder
	b.WriteString(u.head)
	if u.at {
		b.WriteString(u.userinfo)
		b.WriteByte('@')
	}
	b.WriteString(u.rest)
	if u.query {
		b.WriteByte('?')
		b.WriteString(strings.Join(u.params, "&"))
	}
	b.WriteString(u.fragment)
	return b.String()
}

// secretParam reports whether a query parameter ("key=value") carries a
// value under a sensitive key.
func secretParam(p string) bool {
	k, v, has := strings.Cut(p, "=")
	if !has || v == "" {
		return false
	}
	if uk, err := url.QueryUnescape(k); err == nil {
		k = uk
	}
	return isSensitive(k)
}

// masked is u with its credentials as Masked.
func (u urlText) masked() urlText {
	if u.at && u.userinfo != "" {
		u.userinfo = Masked
	}
	params := make([]string, len(u.params))
	for i, p := range u.params {
		if secretParam(p) {
			k, _, _ := strings.Cut(p, "=")
			p = k + "=" + Masked
		}
		params[i] = p
	}
	u.params = params
	return u
}

// holdsMask reports whether a credential place of u reads Masked.
func (u urlText) holdsMask() bool {
	if u.at && u.userinfo == Masked {
		return true
	}
	for _, p := range u.params {
		if _, v, _ := strings.Cut(p, "="); v == Masked && secretParam(p) {
			return true
		}
	}
	return false
}

// maskURL masks the credentials of a URL string; anything else is returned
// as it is.
func maskURL(n *rawdoc.Node) *rawdoc.Node {
	if n.Kind != rawdoc.String {
		return maskTree(n, false)
	}
	u, ok := splitURL(n.Text)
	if !ok {
		return n
	}
	if m := u.masked().String(); m != n.Text {
		return rawdoc.Str(m)
	}
	return n
}

// mergeURL resolves a written url against the stored one (restoreURL).
func mergeURL(in, st *rawdoc.Node) (*rawdoc.Node, error) { return restoreURL("url", in, st) }

// restoreURL resolves a URL written with masked credentials: the masked
// form of the stored URL (st) is the stored URL; any other URL with
// "***" where masking puts it is an error naming the field (at), never
// the URL.
func restoreURL(at string, in, st *rawdoc.Node) (*rawdoc.Node, error) {
	if in.Kind != rawdoc.String || !strings.Contains(in.Text, Masked) {
		return in, nil
	}
	u, ok := splitURL(in.Text)
	if !ok || !u.holdsMask() {
		return in, nil
	}
	if st != nil && st.Kind == rawdoc.String {
		if su, ok := splitURL(st.Text); ok && su.masked().String() == in.Text {
			return st, nil
		}
	}
	return nil, editErr("Cannot set %s to a URL with masked credentials '%s' that is not the stored URL; send the URL with its credentials in clear.", at, Masked)
}
