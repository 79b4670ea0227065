// Package edit masks and edits the config file as written, for the admin
// API (DeerFlow's gateway): secrets shown as Masked, servers replaced,
// merged or toggled. Everything here works on the document before $VAR
// expansion, so a "$TOKEN" placeholder stays a placeholder on a round trip
// and an expanded secret is never written back.
package edit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// Masked is the placeholder shown instead of a secret value.
const Masked = "***"

// EditError is an admin edit that cannot be made. Its text (DeerFlow's
// wording) names keys and servers, never a value; it is safe to return to
// the caller.
type EditError struct{ Msg string }

func (e *EditError) Error() string { return e.Msg }

// ErrNoServer is returned by SetEnabled for a server the file does not have.
var ErrNoServer = errors.New("no such MCP server")

func editErr(format string, args ...any) error { return &EditError{Msg: fmt.Sprintf(format, args...)} }

// sensitiveKey is DeerFlow's sensitive-key rule, applied to normalized keys.
var sensitiveKey = regexp.MustCompile(`(^|_)(api_key|apikey|access_key|private_key|client_secret|secret|token|password|passwd|credential|credentials|authorization|bearer)(_|$)`)

// isSensitive reports whether key names a secret: sensitiveKey on the
// key in snake case.
func isSensitive(key string) bool { return sensitiveKey.MatchString(snakeKey(key)) }

// oauthPlain are the oauth fields the sensitive-key rule would take for
// secrets but that only name things (an endpoint, response fields, a token
// type): GET shows them, so an operator can see where tokens come from.
var oauthPlain = map[string]bool{"token_url": true, "token_field": true, "token_type_field": true, "default_token_type": true}

// keepPlain returns n unchanged: the masking of an oauthPlain field.
func keepPlain(n *rawdoc.Node) *rawdoc.Node { return n }

// exchangePlain are the token_exchange fields shown as written although the
// block's name (and some of theirs) looks like a secret's: they say where
// and how the exchange happens, so an operator can confirm which endpoint
// is live. Its client_secret and actor_token are masked; any other field
// goes by the sensitive-key rule.
var exchangePlain = map[string]bool{
	"enabled": true, "token_url": true, "client_id": true, "auth_style": true, "subject_header": true,
	"subject_token_type": true, "audience": true, "resource": true, "scope": true, "requested_token_type": true,
	"actor_token_type": true, "header": true, "token_prefix": true, "refresh_skew_seconds": true,
}

// exchangeSensitive reports whether a token_exchange field holds a secret.
func exchangeSensitive(key string) bool { return !exchangePlain[key] && isSensitive(key) }

// snakeKey normalizes a key for sensitiveKey: camelCase → snake_case,
// lower case, anything not alphanumeric → "_".
func snakeKey(key string) string {
	var b strings.Builder
	rs := []rune(key)
	for i, r := range rs {
		if camelBoundary(rs, i) {
			b.WriteByte('_')
		}
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// camelBoundary reports whether rs[i] starts a new camelCase word: an
// upper-case letter after a lower-case letter or a digit.
func camelBoundary(rs []rune, i int) bool {
	return unicode.IsUpper(rs[i]) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]))
}

// decodeRaw decodes file content without $VAR expansion; empty content is
// an empty document.
func decodeRaw(data []byte, filename string) (*rawdoc.Node, error) {
	data = rawdoc.TrimBOM(data)
	if len(bytes.TrimSpace(data)) == 0 {
		return &rawdoc.Node{Kind: rawdoc.Object}, nil
	}
	root, _, err := rawdoc.Decode(data, filename)
	if err != nil {
		return nil, err
	}
	if root.Kind != rawdoc.Object {
		return nil, errors.Join(config.Problem{Message: "the config file must contain an object at the top level"})
	}
	return root, nil
}

func isMasked(n *rawdoc.Node) bool { return n != nil && n.Kind == rawdoc.String && n.Text == Masked }

// MaskedServers returns the file's servers in the admin API's shape,
// {"mcp_servers": {name: server}}, with every env and header value, every
// oauth.extra_token_params and user_auth.users value, every value under
// a sensitive key, token_exchange's client_secret and actor_token, and the
// credentials of url and the token_urls (url.go) as "***", and oauth
// client_secret and refresh_token null. token_exchange's other fields and
// oauth's token_url, token_field, token_type_field and default_token_type
// are shown: they name endpoints and formats, not secrets. Empty content
// has no servers.
func MaskedServers(data []byte, filename string) (json.RawMessage, error) {
	root, err := decodeRaw(data, filename)
	if err != nil {
		return nil, err
	}
	servers := &rawdoc.Node{Kind: rawdoc.Object}
	if s := root.Get("mcpServers"); s != nil && s.Kind == rawdoc.Object {
		for i, name := range s.Keys {
			servers.Set(name, maskServer(s.Vals[i]))
		}
	}
	out := &rawdoc.Node{Kind: rawdoc.Object, Keys: []string{"mcp_servers"}, Vals: []*rawdoc.Node{servers}}
	return out.JSON(), nil
}

func maskServer(n *rawdoc.Node) *rawdoc.Node {
	if n.Kind != rawdoc.Object {
		return maskTree(n, false)
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range n.Keys {
		v := n.Vals[i]
		switch k {
		case "env", "headers":
			v = maskValues(v)
		case "url":
			v = maskURL(v)
		case "oauth":
			v = maskObject(v, map[string]func(*rawdoc.Node) *rawdoc.Node{
				"client_secret":      func(*rawdoc.Node) *rawdoc.Node { return &rawdoc.Node{Kind: rawdoc.Null} },
				"refresh_token":      func(*rawdoc.Node) *rawdoc.Node { return &rawdoc.Node{Kind: rawdoc.Null} },
				"extra_token_params": maskValues,
				"token_url":          maskURL, "token_field": keepPlain, "token_type_field": keepPlain, "default_token_type": keepPlain,
			})
		case "token_exchange":
			v = maskExchange(v)
		case "user_auth":
			v = maskObject(v, map[string]func(*rawdoc.Node) *rawdoc.Node{"users": maskValues})
		default:
			v = maskTree(v, isSensitive(k))
		}
		out.Set(k, v)
	}
	return out
}

// maskExchange masks a token_exchange block: its secrets (client_secret,
// actor_token) as "***", its token_url's credentials (maskURL), the other
// fields shown as written.
func maskExchange(n *rawdoc.Node) *rawdoc.Node {
	if n.Kind != rawdoc.Object {
		return maskTree(n, false)
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range n.Keys {
		v := n.Vals[i]
		switch {
		case k == "token_url":
			v = maskURL(v)
		case exchangePlain[k]:
		default:
			v = maskTree(v, isSensitive(k))
		}
		out.Set(k, v)
	}
	return out
}

// maskValues masks every value of an object.
func maskValues(n *rawdoc.Node) *rawdoc.Node {
	if n.Kind != rawdoc.Object {
		return maskTree(n, true)
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for _, k := range n.Keys {
		out.Set(k, rawdoc.Str(Masked))
	}
	return out
}

// maskObject masks the keys in special with their function and the rest by
// the sensitive-key rule.
func maskObject(n *rawdoc.Node, special map[string]func(*rawdoc.Node) *rawdoc.Node) *rawdoc.Node {
	if n.Kind != rawdoc.Object {
		return maskTree(n, false)
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range n.Keys {
		if f, ok := special[k]; ok {
			out.Set(k, f(n.Vals[i]))
			continue
		}
		out.Set(k, maskTree(n.Vals[i], isSensitive(k)))
	}
	return out
}

// maskTree masks every scalar under a sensitive key, and looks for
// sensitive keys everywhere else.
func maskTree(n *rawdoc.Node, sensitive bool) *rawdoc.Node {
	switch n.Kind {
	case rawdoc.Object:
		return maskFields(n, sensitive)
	case rawdoc.Array:
		out := &rawdoc.Node{Kind: rawdoc.Array}
		for _, item := range n.Items {
			out.Items = append(out.Items, maskTree(item, sensitive))
		}
		return out
	case rawdoc.Null:
		return n
	}
	if sensitive {
		return rawdoc.Str(Masked)
	}
	return n
}

// maskFields is maskTree of an object: a value is sensitive under a
// sensitive object or key.
func maskFields(n *rawdoc.Node, sensitive bool) *rawdoc.Node {
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range n.Keys {
		out.Set(k, maskTree(n.Vals[i], sensitive || isSensitive(k)))
	}
	return out
}

// deerflowFields are the server fields DeerFlow's PUT model declares: one
// omitted from a PUT body takes its default. Every other field (routing,
// tools, user_auth, headers_from_context, mux settings, extras) is kept from
// the file when omitted.
var deerflowFields = map[string]bool{
	"enabled": true, "type": true, "transport": true, "command": true, "args": true, "env": true, "url": true,
	"headers": true, "oauth": true, "description": true, "tool_name_prefix": true, "tool_call_timeout": true,
	"session_init_timeout": true, "task_toolsets": true,
}

// ReplaceServers returns the file content with its mcpServers replaced by
// the mcp_servers of a PUT body (servers absent from the body are removed),
// each merged with the server stored under the same name so that masked
// values round-trip to the stored ones. The other top-level keys are kept
// as written. It also returns the servers' names in body order. An
// *EditError is the caller's mistake (400).
//
// Two rules keep the mux's secrets where the file put them. A "$VAR" in a
// written server must name a variable the file's servers already use or
// admin.allowed_env lists (the mux's own settings — admin, inbound, store —
// do not count), so a write cannot send the admin token or an inbound key
// anywhere. And a stored secret (a masked or omitted value the merge
// resolves to the file's) stays bound to its destination: a write that
// changes the server's type, url, command, args or oauth.token_url while
// keeping one is refused.
func ReplaceServers(data []byte, filename string, body []byte) ([]byte, []string, error) {
	root, err := decodeRaw(data, filename)
	if err != nil {
		return nil, nil, err
	}
	in, err := requestServers(body)
	if err != nil {
		return nil, nil, err
	}
	stored := root.Obj("mcpServers")
	vars := writableVars(root)
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, name := range in.Keys {
		merged, err := writeServer(name, in.Vals[i], stored.Obj(name), vars)
		if err != nil {
			return nil, nil, err
		}
		out.Set(name, merged)
	}
	root.Set("mcpServers", out)
	return render(root), in.Keys, nil
}

// requestServers decodes a PUT body and returns its mcp_servers object.
func requestServers(body []byte) (*rawdoc.Node, error) {
	req, _, err := rawdoc.DecodeJSON(body, "request body")
	if err != nil {
		return nil, &EditError{Msg: "Invalid request body: " + err.Error()}
	}
	in := req.Obj("mcp_servers")
	if in == nil || in.Kind != rawdoc.Object {
		return nil, editErr("Invalid request body: mcp_servers must be an object mapping server names to server settings")
	}
	return in, nil
}

// writeServer merges one written server with the stored one (st, nil when
// new) and applies the write rules: no mask left, stored secrets bound to
// their destination, only writable variables.
func writeServer(name string, in, st *rawdoc.Node, vars map[string]bool) (*rawdoc.Node, error) {
	merged, err := mergeServer(name, in, st)
	if err != nil {
		return nil, err
	}
	if err := noMasks(merged, "mcp_servers."+name); err != nil {
		return nil, err
	}
	if err := keptSecrets(name, merged, st); err != nil {
		return nil, err
	}
	if err := checkVars(name, merged, "", vars); err != nil {
		return nil, err
	}
	return merged, nil
}

// SetEnabled returns the file content with one server's enabled flag set;
// nothing else changes. ErrNoServer when the file has no such server.
func SetEnabled(data []byte, filename, server string, enabled bool) ([]byte, error) {
	root, err := decodeRaw(data, filename)
	if err != nil {
		return nil, err
	}
	s := root.Obj("mcpServers").Obj(server)
	if s == nil {
		return nil, ErrNoServer
	}
	if s.Kind != rawdoc.Object {
		return nil, editErr("MCP server '%s' is not an object", server)
	}
	s.Set("enabled", &rawdoc.Node{Kind: rawdoc.Bool, Bool: enabled})
	return render(root), nil
}

// render writes a document as indented JSON.
func render(root *rawdoc.Node) []byte {
	var buf bytes.Buffer
	_ = json.Indent(&buf, root.JSON(), "", "  ") // root.JSON() is valid JSON
	buf.WriteByte('\n')
	return buf.Bytes()
}

// Errors for a "***" value the stored server cannot resolve; the first %s
// is the key, the second Masked.
const (
	maskedEnv         = "Cannot set env key '%s' to masked value '%s'; provide a real value."
	maskedHeader      = "Cannot set header '%s' to masked value '%s'; provide a real value."
	maskedUser        = "Cannot set user_auth credential for '%s' to masked value '%s'; provide a real value."
	maskedTokenParam  = "Cannot set oauth extra_token_params key '%s' to masked value '%s'; provide a real value."
	maskedExtraConfig = "Cannot set extra config key '%s' to masked value '%s'; provide a real value."
	maskedExchange    = "Cannot set token_exchange key '%s' to masked value '%s'; provide a real value."
)

// serverMerges are the server fields with a merge rule of their own; any
// other field goes through restore.
var serverMerges = map[string]func(in, st *rawdoc.Node) (*rawdoc.Node, error){
	"url":                  mergeURL,
	"token_exchange":       mergeExchange,
	"env":                  mergeEnv,
	"headers":              mergeHeaders,
	"oauth":                mergeOAuth,
	"user_auth":            mergeUserAuth,
	"headers_from_context": mergeHeadersFromContext,
}

// mergeServer merges a written server with the stored one (st, nil when
// new): each written field by its rule, then the stored fields a PUT keeps
// when omitted.
func mergeServer(name string, in, st *rawdoc.Node) (*rawdoc.Node, error) {
	if in.Kind != rawdoc.Object {
		return nil, editErr("MCP server '%s' must be an object", name)
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range in.Keys {
		v, err := mergeField(k, in.Vals[i], st.Obj(k))
		if err != nil {
			return nil, err
		}
		out.Set(k, v)
	}
	keepOmitted(out, in, st)
	return out, nil
}

// mergeField merges one written server field with the stored one.
func mergeField(k string, v, sv *rawdoc.Node) (*rawdoc.Node, error) {
	if merge, ok := serverMerges[k]; ok {
		return merge(v, sv)
	}
	return restore(k, v, sv, isSensitive(k))
}

// keepOmitted copies into out the stored fields that in omits and that
// are not DeerFlow's (whose omission means their default).
func keepOmitted(out, in, st *rawdoc.Node) {
	if st == nil || st.Kind != rawdoc.Object {
		return
	}
	for i, k := range st.Keys {
		if !deerflowFields[k] && in.Get(k) == nil {
			out.Set(k, st.Vals[i])
		}
	}
}

// mergeEnv resolves "***" env values to the stored ones.
func mergeEnv(in, st *rawdoc.Node) (*rawdoc.Node, error) {
	return mergeValues(in, st, false, maskedEnv)
}

// mergeHeaders resolves "***" header values to the stored ones, matching
// header names case-insensitively.
func mergeHeaders(in, st *rawdoc.Node) (*rawdoc.Node, error) {
	return mergeValues(in, st, true, maskedHeader)
}

// mergeUserAuth merges user_auth, resolving "***" user credentials.
func mergeUserAuth(in, st *rawdoc.Node) (*rawdoc.Node, error) {
	return mergeNested(in, st, "users", maskedUser)
}

// mergeHeadersFromContext merges headers_from_context.
func mergeHeadersFromContext(in, st *rawdoc.Node) (*rawdoc.Node, error) {
	return mergeNested(in, st, "", "")
}

// mergeValues resolves "***" values of a map to the stored ones (fold: keys
// compare case-insensitively, as header names do); masked for a key the
// store lacks is an error with the text failFormat (see maskedEnv).
func mergeValues(in, st *rawdoc.Node, fold bool, failFormat string) (*rawdoc.Node, error) {
	if in.Kind != rawdoc.Object {
		return in, nil
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range in.Keys {
		v := in.Vals[i]
		if isMasked(v) {
			sv := lookup(st, k, fold)
			if sv == nil || isMasked(sv) {
				return nil, editErr(failFormat, k, Masked)
			}
			v = sv
		}
		out.Set(k, v)
	}
	return out, nil
}

// lookup returns key's value in obj (when an object), matching keys
// case-insensitively when fold is set and no exact key is there.
func lookup(obj *rawdoc.Node, key string, fold bool) *rawdoc.Node {
	if obj == nil || obj.Kind != rawdoc.Object {
		return nil
	}
	if v := obj.Get(key); v != nil {
		return v
	}
	if fold {
		for i, k := range obj.Keys {
			if strings.EqualFold(k, key) {
				return obj.Vals[i]
			}
		}
	}
	return nil
}

// mergeOAuth: client_secret and refresh_token null, omitted or "***" keep
// the stored value, "" clears it; extra_token_params "***" values resolve to
// the stored ones and an omitted map keeps the stored one.
func mergeOAuth(in, st *rawdoc.Node) (*rawdoc.Node, error) {
	if in.Kind != rawdoc.Object {
		return in, nil
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range in.Keys {
		v, keep, err := mergeOAuthField(k, in.Vals[i], st.Obj(k))
		if err != nil {
			return nil, err
		}
		if keep {
			out.Set(k, v)
		}
	}
	keepOmittedOAuth(out, in, st)
	return out, nil
}

// keepOmittedOAuth copies into out the stored client_secret,
// refresh_token and extra_token_params that in omits.
func keepOmittedOAuth(out, in, st *rawdoc.Node) {
	for _, k := range []string{"client_secret", "refresh_token", "extra_token_params"} {
		if sv := st.Obj(k); sv != nil && sv.Kind != rawdoc.Null && in.Get(k) == nil {
			out.Set(k, sv)
		}
	}
}

// mergeOAuthField merges one written oauth field with the stored one;
// keep is false for a secret sent null with none stored (left out).
func mergeOAuthField(k string, v, sv *rawdoc.Node) (_ *rawdoc.Node, keep bool, _ error) {
	switch {
	case k == "client_secret" || k == "refresh_token":
		return mergeOAuthSecret(k, v, sv)
	case k == "extra_token_params":
		v, err := mergeValues(v, sv, false, maskedTokenParam)
		return v, true, err
	}
	if k == "token_url" {
		v, err := restoreURL("oauth.token_url", v, sv)
		return v, true, err
	}
	v, err := restore(k, v, sv, !oauthPlain[k] && isSensitive(k))
	return v, true, err
}

// mergeExchange merges a written token_exchange block with the stored one:
// its client_secret and actor_token "***" or omitted keep the stored value
// ("" clears it), its token_url with masked credentials the stored URL, the
// rest as written.
func mergeExchange(in, st *rawdoc.Node) (*rawdoc.Node, error) {
	if in.Kind != rawdoc.Object {
		return in, nil
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range in.Keys {
		v, err := mergeExchangeField(k, in.Vals[i], st.Obj(k))
		if err != nil {
			return nil, err
		}
		out.Set(k, v)
	}
	for _, k := range []string{"client_secret", "actor_token"} {
		if sv := st.Obj(k); sv != nil && sv.Kind != rawdoc.Null && in.Get(k) == nil {
			out.Set(k, sv)
		}
	}
	return out, nil
}

// mergeExchangeField merges one written token_exchange field with the
// stored one.
func mergeExchangeField(k string, v, sv *rawdoc.Node) (*rawdoc.Node, error) {
	switch {
	case k == "token_url":
		return restoreURL("token_exchange.token_url", v, sv)
	case exchangeSensitive(k) && isMasked(v):
		if sv == nil || sv.Kind == rawdoc.Null || isMasked(sv) {
			return nil, editErr(maskedExchange, k, Masked)
		}
		return sv, nil
	}
	return restore(k, v, sv, exchangeSensitive(k))
}

// mergeOAuthSecret resolves a client_secret or refresh_token sent null or
// "***" to the stored value; without one, null leaves the key out and
// "***" is an error.
func mergeOAuthSecret(k string, v, sv *rawdoc.Node) (_ *rawdoc.Node, keep bool, _ error) {
	if v.Kind != rawdoc.Null && !isMasked(v) {
		return v, true, nil
	}
	if sv != nil && sv.Kind != rawdoc.Null {
		return sv, true, nil
	}
	if isMasked(v) {
		return nil, false, editErr("Cannot persist masked secret placeholder for oauth.%s; provide a real value.", k)
	}
	return nil, false, nil
}

// mergeNested merges a block that replaces only the sub-fields sent
// (user_auth, headers_from_context); mapKey, when set, is a map whose
// "***" values resolve to the stored ones (an error with the text
// failFormat otherwise).
func mergeNested(in, st *rawdoc.Node, mapKey, failFormat string) (*rawdoc.Node, error) {
	if in.Kind != rawdoc.Object {
		return in, nil
	}
	out := &rawdoc.Node{Kind: rawdoc.Object}
	if st != nil && st.Kind == rawdoc.Object {
		for i, k := range st.Keys {
			out.Set(k, st.Vals[i])
		}
	}
	for i, k := range in.Keys {
		v, err := mergeNestedField(k, in.Vals[i], st.Obj(k), mapKey, failFormat)
		if err != nil {
			return nil, err
		}
		out.Set(k, v)
	}
	return out, nil
}

// mergeNestedField merges one sub-field of a nested block: the map at
// mapKey (when set) by mergeValues, the others by restore.
func mergeNestedField(k string, v, sv *rawdoc.Node, mapKey, failFormat string) (*rawdoc.Node, error) {
	if mapKey != "" && k == mapKey {
		return mergeValues(v, sv, false, failFormat)
	}
	return restore(k, v, sv, isSensitive(k))
}

// restore resolves "***" under sensitive keys to the stored value at the
// same place. An array holding masks must equal the masked stored array.
func restore(key string, in, st *rawdoc.Node, sensitive bool) (*rawdoc.Node, error) {
	switch in.Kind {
	case rawdoc.String:
		return restoreString(key, in, st, sensitive)
	case rawdoc.Object:
		return restoreObject(in, st, sensitive)
	case rawdoc.Array:
		return restoreArray(key, in, st, sensitive)
	}
	return in, nil
}

// restoreString resolves a "***" string under a sensitive key to the
// stored value, which must be a real one.
func restoreString(key string, in, st *rawdoc.Node, sensitive bool) (*rawdoc.Node, error) {
	if !isMasked(in) || !sensitive {
		return in, nil
	}
	if st == nil || st.Kind == rawdoc.Null || isMasked(st) {
		return nil, editErr(maskedExtraConfig, key, Masked)
	}
	return st, nil
}

// restoreObject restores every value of an object against the stored
// object's value at the same key.
func restoreObject(in, st *rawdoc.Node, sensitive bool) (*rawdoc.Node, error) {
	out := &rawdoc.Node{Kind: rawdoc.Object}
	for i, k := range in.Keys {
		v, err := restore(k, in.Vals[i], st.Obj(k), sensitive || isSensitive(k))
		if err != nil {
			return nil, err
		}
		out.Set(k, v)
	}
	return out, nil
}

// restoreArray resolves an array holding masks: to the stored array when
// it masks to the same, as written when its "***" are literals, else an
// error.
func restoreArray(key string, in, st *rawdoc.Node, sensitive bool) (*rawdoc.Node, error) {
	if !hasMask(in) {
		return in, nil
	}
	if st != nil && st.Kind == rawdoc.Array && bytes.Equal(maskTree(st, sensitive).JSON(), in.JSON()) {
		return st, nil
	}
	if !masksSecret(in, sensitive) {
		return in, nil // a literal "***" elsewhere: the final guard names it
	}
	return nil, editErr("Cannot edit extra config array '%s' while masked secrets remain; provide real values for every masked secret.", key)
}

// masksSecret reports whether n holds "***" where GET would mask a secret.
func masksSecret(n *rawdoc.Node, sensitive bool) bool {
	if isMasked(n) {
		return sensitive
	}
	for _, it := range n.Items {
		if masksSecret(it, sensitive) {
			return true
		}
	}
	for i, k := range n.Keys {
		if masksSecret(n.Vals[i], sensitive || isSensitive(k)) {
			return true
		}
	}
	return false
}

func hasMask(n *rawdoc.Node) bool {
	if isMasked(n) {
		return true
	}
	for _, it := range n.Items {
		if hasMask(it) {
			return true
		}
	}
	for _, v := range n.Vals {
		if hasMask(v) {
			return true
		}
	}
	return false
}

// noMasks is the final guard: no "***" may be written.
func noMasks(n *rawdoc.Node, at string) error {
	if isMasked(n) {
		return editErr("Cannot persist masked secret placeholder for %s; provide a real value.", at)
	}
	for i, it := range n.Items {
		if err := noMasks(it, fmt.Sprintf("%s[%d]", at, i)); err != nil {
			return err
		}
	}
	for i, k := range n.Keys {
		if err := noMasks(n.Vals[i], at+"."+k); err != nil {
			return err
		}
	}
	return nil
}

// writableVars are the variables an admin write may name as "$VAR": those
// the stored servers already use and those admin.allowed_env lists.
func writableVars(root *rawdoc.Node) map[string]bool {
	vars := map[string]bool{}
	if s := root.Obj("mcpServers"); s != nil {
		usedVars(s, vars)
	}
	if l := root.Obj("admin").Obj("allowed_env"); l != nil {
		for _, it := range l.Items {
			if it.Kind == rawdoc.String {
				vars[it.Text] = true
			}
		}
	}
	return vars
}

// usedVars adds the variable of every "$VAR" string under n.
func usedVars(n *rawdoc.Node, into map[string]bool) {
	if name, ok := strings.CutPrefix(n.Text, "$"); ok && n.Kind == rawdoc.String {
		into[name] = true
	}
	for _, it := range n.Items {
		usedVars(it, into)
	}
	for _, v := range n.Vals {
		usedVars(v, into)
	}
}

// checkVars refuses the first "$VAR" under n (at its path) that vars lacks;
// the error names the variable, never its value.
func checkVars(server string, n *rawdoc.Node, at string, vars map[string]bool) error {
	if err := checkVar(server, n, at, vars); err != nil {
		return err
	}
	for i, it := range n.Items {
		if err := checkVars(server, it, fmt.Sprintf("%s[%d]", at, i), vars); err != nil {
			return err
		}
	}
	for i, k := range n.Keys {
		if err := checkVars(server, n.Vals[i], strings.TrimPrefix(at+"."+k, "."), vars); err != nil {
			return err
		}
	}
	return nil
}

// checkVar refuses n (at its path) when it is a "$VAR" string naming a
// variable vars lacks.
func checkVar(server string, n *rawdoc.Node, at string, vars map[string]bool) error {
	name, ok := strings.CutPrefix(n.Text, "$")
	if !ok || n.Kind != rawdoc.String || vars[name] {
		return nil
	}
	return editErr("MCP server '%s' refers to environment variable '%s' at %s, which the config file's servers do not use; an API write may expand only those or the variables admin.allowed_env lists.",
		server, name, at)
}

// keptSecrets refuses a write that changes where a server connects while
// keeping one of its stored secrets: every value GET would mask that the
// merge took from the stored server (by "***", null or omission) must be
// sent again in clear once the destination changes.
func keptSecrets(server string, merged, st *rawdoc.Node) error {
	if st == nil || st.Kind != rawdoc.Object || merged.Kind != rawdoc.Object {
		return nil
	}
	field := changedDestination(merged, st)
	if field == "" {
		return nil
	}
	fromStore := map[*rawdoc.Node]bool{}
	collect(st, fromStore)
	if at := storedSecret(merged, maskServer(merged), "", fromStore); at != "" {
		return editErr("MCP server '%s' changes %s while keeping the stored value of %s; a stored secret stays bound to the destination it was written for, so send %s again in clear.",
			server, field, at, at)
	}
	return nil
}

// changedDestination names the first field of where a server connects (its
// type, url, command, args, oauth.token_url) that differs between merged and
// st, or "". Absent, null, "" and [] are the same empty value. A server left
// with no url and no command, or an oauth block removed, sends nothing
// anywhere new.
func changedDestination(merged, st *rawdoc.Node) string {
	if isEmpty(merged.Get("url")) && isEmpty(merged.Get("command")) {
		return ""
	}
	if serverKind(merged) != serverKind(st) {
		return "type"
	}
	for _, k := range []string{"url", "command", "args"} {
		if !sameValue(merged.Get(k), st.Get(k)) {
			return k
		}
	}
	return changedTokenURL(merged, st)
}

// changedTokenURL returns "oauth.token_url" or "token_exchange.token_url"
// when merged has that block and its token_url differs from st's, else "".
func changedTokenURL(merged, st *rawdoc.Node) string {
	for _, block := range []string{"oauth", "token_exchange"} {
		if o := merged.Obj(block); o != nil && !sameValue(o.Obj("token_url"), st.Obj(block).Obj("token_url")) {
			return block + ".token_url"
		}
	}
	return ""
}

// serverKind is DeerFlow's type rule on the raw server: "type", else
// "transport", else stdio.
func serverKind(n *rawdoc.Node) string {
	for _, k := range []string{"type", "transport"} {
		if v := n.Get(k); v != nil && v.Kind == rawdoc.String && v.Text != "" {
			return v.Text
		}
	}
	return config.TypeStdio
}

// sameValue reports whether a and b are equal as written, taking every
// empty value (absent, null, "", []) as the same.
func sameValue(a, b *rawdoc.Node) bool {
	if isEmpty(a) || isEmpty(b) {
		return isEmpty(a) && isEmpty(b)
	}
	return bytes.Equal(a.JSON(), b.JSON())
}

// isEmpty reports whether n is absent, null, "" or [].
func isEmpty(n *rawdoc.Node) bool {
	return n == nil || n.Kind == rawdoc.Null || (n.Kind == rawdoc.String && n.Text == "") || (n.Kind == rawdoc.Array && len(n.Items) == 0)
}

// collect adds every node under n to into.
func collect(n *rawdoc.Node, into map[*rawdoc.Node]bool) {
	into[n] = true
	for _, it := range n.Items {
		collect(it, into)
	}
	for _, v := range n.Vals {
		collect(v, into)
	}
}

// storedSecret walks a server beside its masked form and returns the path of
// the first value masking hides (or nulls) that is a node of the stored
// server, or "".
func storedSecret(n, masked *rawdoc.Node, at string, fromStore map[*rawdoc.Node]bool) string {
	if hiddenBy(n, masked) {
		if fromStore[n] {
			return at
		}
		return ""
	}
	if p := storedSecretItem(n, masked, at, fromStore); p != "" {
		return p
	}
	return storedSecretField(n, masked, at, fromStore)
}

// hiddenBy reports whether masking hides n: masked is "***" where n is
// not, or null where n is not.
func hiddenBy(n, masked *rawdoc.Node) bool {
	return (isMasked(masked) && !isMasked(n)) || (masked.Kind == rawdoc.Null && n.Kind != rawdoc.Null)
}

// storedSecretItem is storedSecret over the items of an array.
func storedSecretItem(n, masked *rawdoc.Node, at string, fromStore map[*rawdoc.Node]bool) string {
	for i, it := range n.Items {
		if i >= len(masked.Items) {
			continue
		}
		if p := storedSecret(it, masked.Items[i], fmt.Sprintf("%s[%d]", at, i), fromStore); p != "" {
			return p
		}
	}
	return ""
}

// storedSecretField is storedSecret over the values of an object.
func storedSecretField(n, masked *rawdoc.Node, at string, fromStore map[*rawdoc.Node]bool) string {
	for i, k := range n.Keys {
		mv := masked.Get(k)
		if mv == nil {
			continue
		}
		if p := storedSecret(n.Vals[i], mv, strings.TrimPrefix(at+"."+k, "."), fromStore); p != "" {
			return p
		}
	}
	return ""
}
