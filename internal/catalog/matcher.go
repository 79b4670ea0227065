package catalog

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// matcher is a query compiled as a case-insensitive regular expression, or
// as a literal when it has no metacharacters or is not valid RE2 syntax.
// Literals are matched by substring search on casefolded text, which is
// what the regular expression would do, many times faster. RE2 runs in
// linear time, so no query can stall the server.
type matcher struct {
	re *regexp.Regexp
	// lit is the casefolded literal when re is nil; with re, an ASCII
	// literal every match contains (or ""), checked first.
	lit string
}

// newMatcher compiles a query.
func newMatcher(q string) matcher {
	if regexp.QuoteMeta(q) != q {
		if re, err := regexp.Compile("(?i)" + q); err == nil {
			m := matcher{re: re}
			if tree, err := syntax.Parse("(?i)"+q, syntax.Perl); err == nil {
				m.lit = strings.ToLower(requiredLiteral(tree.Simplify()))
			}
			return m
		}
	}
	return matcher{lit: casefold(q)}
}

// requiredLiteral returns the longest ASCII literal that every match of re
// contains, or "". Containment in casefolded text is then a sound
// prefilter: whatever matches the literal case-insensitively folds to it.
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		return asciiLiteral(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		return longestRequired(re.Sub)
	}
	return ""
}

// asciiLiteral returns runes as a string when they are all ASCII, or "".
func asciiLiteral(runes []rune) string {
	for _, r := range runes {
		if r >= utf8.RuneSelf {
			return ""
		}
	}
	return string(runes)
}

// longestRequired returns the longest required literal of a concatenation's
// parts.
func longestRequired(subs []*syntax.Regexp) string {
	best := ""
	for _, sub := range subs {
		if l := requiredLiteral(sub); len(l) > len(best) {
			best = l
		}
	}
	return best
}

// match reports whether m matches s, whose casefolded form is folded.
func (m matcher) match(s, folded string) bool {
	if m.re == nil {
		return strings.Contains(folded, m.lit)
	}
	if m.lit != "" && !strings.Contains(folded, m.lit) {
		return false
	}
	return m.re.MatchString(s)
}

// count returns how many times m matches s, whose casefolded form is
// folded.
func (m matcher) count(s, folded string) int {
	if m.re == nil {
		return strings.Count(folded, m.lit)
	}
	if m.lit != "" && !strings.Contains(folded, m.lit) {
		return 0
	}
	return len(m.re.FindAllStringIndex(s, -1))
}
