package secret

import "strings"

// Credential-shaped strings: RedactTokens finds the common token formats
// in free text — values the mux was never told about — in one pass over
// the text, without regular expressions.
//
// Why it is linear: a token of a rule starts only where a maximal run of
// the rule's characters starts (the byte before is not one of them), so
// the runs RedactTokens measures for one class are disjoint and each byte
// is read at most once per character class (five), plus once by the
// main loop. A PEM block's end is searched for at most once: without one,
// everything from the first private key header on is redacted. Work is
// therefore bounded by a constant number of bytes read per byte of text
// (one by the main loop, one per class, a PEM header's 64 bytes per 11
// bytes of "-----BEGIN ", one for the PEM end: under 16), whatever the
// text (TestRedactTokensLinear counts it).

// tokenRule is one credential format: a prefix at a word boundary and a
// body of the class's characters at least min long.
type tokenRule struct {
	prefix string
	class  *[256]bool // the characters of the whole token, prefix included
	min    int        // the shortest body after the prefix
}

// Character classes of token bodies.
var (
	alnumUnderscore = classOf("A-Za-z0-9_")
	alnumDash       = classOf("A-Za-z0-9_-")
	upperDigits     = classOf("A-Z0-9")
	jwtChars        = classOf("A-Za-z0-9_.-")
	bearerChars     = classOf("A-Za-z0-9._~+/=-")
)

// tokenRules are the formats RedactTokens knows: GitHub (classic and
// fine-grained), AWS access key ids, Slack, Stripe live keys, Google API
// keys, OpenAI and Anthropic keys. JWTs, PEM private keys and Bearer
// credentials are matched by their own shape (jwtAt, pemAt, bearerAt).
var tokenRules = []tokenRule{
	{"ghp_", alnumUnderscore, 20}, {"gho_", alnumUnderscore, 20}, {"ghu_", alnumUnderscore, 20},
	{"ghs_", alnumUnderscore, 20}, {"ghr_", alnumUnderscore, 20}, {"github_pat_", alnumUnderscore, 22},
	{"AKIA", upperDigits, 16}, {"ASIA", upperDigits, 16},
	{"xoxa-", alnumDash, 10}, {"xoxb-", alnumDash, 10}, {"xoxp-", alnumDash, 10}, {"xoxr-", alnumDash, 10}, {"xoxs-", alnumDash, 10},
	{"sk_live_", alnumUnderscore, 16}, {"rk_live_", alnumUnderscore, 16},
	{"AIza", alnumDash, 30},
	{"sk-", alnumDash, 20}, // OpenAI sk-…, sk-proj-…; Anthropic sk-ant-…
}

// Shapes matched by their own code.
const (
	pemBegin  = "-----BEGIN "
	pemEnd    = "-----END "
	maxPEMTag = 64 // the longest "… PRIVATE KEY-----" label looked at
	bearer    = "Bearer"
	// minBearer is the shortest credential after "Bearer " that is
	// redacted ("Bearer token" in prose is not one).
	minBearer = 16
)

// firstBytes marks the bytes a token may start with.
var firstBytes = func() *[256]bool {
	var t [256]bool
	for _, r := range tokenRules {
		t[r.prefix[0]] = true
	}
	t['e'], t['-'], t['B'], t['b'] = true, true, true, true
	return &t
}()

// classOf returns the class of the characters ranges names ("A-Z0-9_").
func classOf(ranges string) *[256]bool {
	var c [256]bool
	for i := 0; i < len(ranges); i++ {
		if i+2 < len(ranges) && ranges[i+1] == '-' {
			for b := ranges[i]; b <= ranges[i+2]; b++ {
				c[b] = true
			}
			i += 2
			continue
		}
		c[ranges[i]] = true
	}
	return &c
}

// RedactTokens returns text with every credential-shaped string replaced
// by Redacted, and how many it replaced.
func RedactTokens(text string) (string, int) {
	var work int
	return redactTokens(text, &work)
}

// detector is one pass of RedactTokens over a text.
type detector struct {
	s      string
	work   *int // bytes read, for the linearity test
	noPEM  bool // no PEM end marker follows: searched once
	out    strings.Builder
	copied int // s[:copied] is written to out
	n      int // replacements
}

// redactTokens is RedactTokens counting the bytes it reads in work.
func redactTokens(s string, work *int) (string, int) {
	d := detector{s: s, work: work}
	for i := 0; i < len(s); {
		*work++
		if !firstBytes[s[i]] {
			i++
			continue
		}
		if end, keep := d.match(i); end > i {
			d.replace(i+keep, end)
			i = end
			continue
		}
		i++
	}
	if d.n == 0 {
		return s, 0
	}
	d.out.WriteString(s[d.copied:])
	return d.out.String(), d.n
}

// replace writes s[copied:from] and Redacted in place of s[from:to].
func (d *detector) replace(from, to int) {
	if d.n == 0 {
		d.out.Grow(len(d.s))
	}
	d.out.WriteString(d.s[d.copied:from])
	d.out.WriteString(Redacted)
	d.copied, d.n = to, d.n+1
}

// match returns the end of a token starting at i (i when there is none)
// and how many of its bytes are kept (Bearer's scheme).
func (d *detector) match(i int) (end, keep int) {
	s := d.s
	switch {
	case strings.HasPrefix(s[i:], pemBegin):
		return d.pemAt(i), 0
	case strings.HasPrefix(s[i:], "eyJ"):
		return d.jwtAt(i), 0
	case strings.HasPrefix(s[i:], bearer), strings.HasPrefix(s[i:], "bearer"):
		return d.bearerAt(i)
	}
	for _, r := range tokenRules {
		if !strings.HasPrefix(s[i:], r.prefix) || !d.boundary(i, r.class) {
			continue
		}
		if end := d.run(i+len(r.prefix), r.class); end-i-len(r.prefix) >= r.min {
			return end, 0
		}
	}
	return i, 0
}

// boundary reports whether a run of class starts at i.
func (d *detector) boundary(i int, class *[256]bool) bool {
	return i == 0 || !class[d.s[i-1]]
}

// run returns the end of the run of class starting at i.
func (d *detector) run(i int, class *[256]bool) int {
	for i < len(d.s) && class[d.s[i]] {
		*d.work++
		i++
	}
	return i
}

// jwtAt matches a JWT (three base64url segments, header and payload
// JSON objects: "eyJ….eyJ….sig") at i.
func (d *detector) jwtAt(i int) int {
	if !d.boundary(i, jwtChars) {
		return i
	}
	end := d.run(i, jwtChars)
	tok := d.s[i:end]
	head, rest, ok := strings.Cut(tok, ".")
	if !ok || len(head) < 10 || !strings.HasPrefix(rest, "eyJ") {
		return i
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || len(payload) < 10 {
		return i
	}
	if j := strings.IndexByte(sig, '.'); j >= 0 {
		sig = sig[:j]
	}
	return i + len(head) + 1 + len(payload) + 1 + len(sig)
}

// pemAt matches a PEM private key block at i, through its end line; a
// block without one is redacted to the end of the text.
func (d *detector) pemAt(i int) int {
	s := d.s
	tag := s[i+len(pemBegin) : min(len(s), i+len(pemBegin)+maxPEMTag)]
	*d.work += len(tag)
	shut := strings.Index(tag, "-----")
	if shut < 0 || !strings.HasSuffix(tag[:shut], "PRIVATE KEY") {
		return i
	}
	from := i + len(pemBegin) + shut + 5
	if d.noPEM {
		return len(s)
	}
	e := strings.Index(s[from:], pemEnd)
	if e < 0 {
		*d.work += len(s) - from
		d.noPEM = true
		return len(s)
	}
	*d.work += e
	end := from + e + len(pemEnd)
	if c := strings.Index(s[end:min(len(s), end+maxPEMTag)], "-----"); c >= 0 {
		return end + c + 5
	}
	return end
}

// bearerAt matches "Bearer <credential>" at i (a word), keeping the scheme.
func (d *detector) bearerAt(i int) (end, keep int) {
	s := d.s
	if !d.boundary(i, alnumUnderscore) {
		return i, 0
	}
	j := i + len(bearer)
	sp := j
	for sp < len(s) && s[sp] == ' ' && sp-j < 8 {
		sp++
	}
	if sp == j || (sp < len(s) && s[sp] == ' ') {
		return i, 0
	}
	if !d.boundary(sp, bearerChars) {
		return i, 0
	}
	if end := d.run(sp, bearerChars); end-sp >= minBearer {
		return end, sp - i
	}
	return i, 0
}
