package secret

import (
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// MinScrubLen is the shortest value a Scrubber removes from free text:
// shorter values ("1", "json", "prod") are not credentials, and scrubbing
// them would garble every message they occur in. URLs are redacted whole
// (RedactURL) whatever the length of their parts.
const MinScrubLen = 6

// RedactedUserinfo replaces a URL's user info in RedactURL ("***", as Go's
// HTTP client masks passwords: it is valid user info, so the URL still parses).
const RedactedUserinfo = "***"

// RedactURL returns raw with its user info replaced by RedactedUserinfo and
// every query value by [REDACTED] (query keys, scheme, host and path kept),
// the fragment dropped. A string that does not parse as a URL is replaced
// entirely.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	out := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, Opaque: u.Opaque}
	if u.RawQuery != "" {
		q := u.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			for range q[k] {
				parts = append(parts, url.QueryEscape(k)+"="+Redacted)
			}
		}
		out.RawQuery = strings.Join(parts, "&")
	}
	text := out.String()
	if u.User != nil && u.Host != "" {
		text = strings.Replace(text, "//", "//"+RedactedUserinfo+"@", 1)
	}
	return text
}

// RedactURI returns a resource URI fit to record: RedactURL's form when it
// has user info, a query or a fragment (which may carry a token), else
// the URI unchanged.
func RedactURI(uri string) string {
	if strings.ContainsAny(uri, "?@#") {
		return RedactURL(uri)
	}
	return uri
}

// Scrubber removes known credential values from text: the values a call
// sends (header values, tokens), and the user info and query values of the
// URLs it uses. Build one from everything mcp-mux holds for a call and run
// every upstream error through it before it is logged or shown. The zero
// Scrubber scrubs nothing. Methods are safe for concurrent use.
type Scrubber struct {
	mu    sync.Mutex
	pairs []string          // old, new, … as registered
	r     *strings.Replacer // built from pairs on first use; nil after an Add
	ac    *automaton        // Redact's, built from pairs on first use; nil after an Add
}

// Clone returns a Scrubber with the same values, to extend for one call.
func (s *Scrubber) Clone() *Scrubber {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Scrubber{pairs: append([]string(nil), s.pairs...)}
}

// Add registers credential values; values shorter than MinScrubLen are
// ignored. A value's JSON-escaped form is scrubbed too, so it is also caught
// inside JSON text (an error's data).
func (s *Scrubber) Add(values ...string) {
	for _, v := range values {
		if len(v) < MinScrubLen {
			continue
		}
		s.add(v, Redacted)
		if b, err := json.Marshal(v); err == nil {
			if e := string(b[1 : len(b)-1]); e != v {
				s.add(e, Redacted)
			}
		}
	}
}

// AddHeaderValue registers a header value and, for "<scheme> <credential>"
// values (Bearer, Basic, …), the credential on its own.
func (s *Scrubber) AddHeaderValue(v string) {
	s.Add(v)
	if scheme, cred, ok := strings.Cut(v, " "); ok && scheme != "" && !strings.ContainsAny(scheme, "=,;") {
		s.Add(strings.TrimSpace(cred))
	}
}

// AddURL registers a URL: the URL itself (as written and as Go re-encodes
// it, which is how transport errors quote it) is replaced by its RedactURL
// form, and its user name, password and query values (raw and decoded) are
// scrubbed wherever else they appear.
func (s *Scrubber) AddURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		s.add(raw, "(unparsable URL)")
		return
	}
	if u.User == nil && u.RawQuery == "" {
		return // nothing secret in it
	}
	red := RedactURL(raw)
	s.add(raw, red)
	s.add(u.String(), red)
	if _, ok := u.User.Password(); ok { // as net/http quotes it in errors
		s.add(strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1), red)
	}
	if u.User != nil {
		s.Add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			s.Add(p)
		}
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		_, v, _ := strings.Cut(kv, "=")
		s.Add(v)
		if d, err := url.QueryUnescape(v); err == nil && d != v {
			s.Add(d)
		}
	}
}

func (s *Scrubber) add(old, repl string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(s.pairs); i += 2 {
		if s.pairs[i] == old {
			return
		}
	}
	s.pairs = append(s.pairs, old, repl)
	s.r, s.ac = nil, nil
}

// Scrub returns text with every registered value replaced.
func (s *Scrubber) Scrub(text string) string {
	if s == nil {
		return text
	}
	s.mu.Lock()
	if len(s.pairs) == 0 {
		s.mu.Unlock()
		return text
	}
	if s.r == nil {
		// Longest first, so a value containing another is replaced whole.
		idx := make([]int, len(s.pairs)/2)
		for i := range idx {
			idx[i] = i * 2
		}
		sort.SliceStable(idx, func(a, b int) bool { return len(s.pairs[idx[a]]) > len(s.pairs[idx[b]]) })
		sorted := make([]string, 0, len(s.pairs))
		for _, i := range idx {
			sorted = append(sorted, s.pairs[i], s.pairs[i+1])
		}
		s.r = strings.NewReplacer(sorted...)
	}
	r := s.r
	s.mu.Unlock()
	return r.Replace(text)
}

// Error returns err with its message scrubbed; errors.Is and errors.As still
// see the original chain. A nil err stays nil.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	return &scrubbed{msg: s.Scrub(err.Error()), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
