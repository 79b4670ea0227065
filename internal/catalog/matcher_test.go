package catalog

import (
	"regexp"
	"testing"
)

// TestMatcherAgreesWithRegexp: the literal fast path and the required-literal
// prefilter never change what a case-insensitive regular expression matches.
func TestMatcherAgreesWithRegexp(t *testing.T) {
	texts := []string{
		"slack_send_message Send a message to a Slack channel",
		"pg_query Run a SQL query against Postgres",
		"KELVIN \u212a scale", "long \u017f s", "Straße STRASSE", "ΣΊΣΥΦΟΣ σίσυφος",
		"s42_tool003 Tool 3 of server 42", "S42_TOOL007", "", "tool (beta) [x]",
	}
	queries := []string{
		"slack", "SLACK CHANNEL", "k", "s", "straße", "σίσυφος", "query|postgres",
		"s42_tool0[0-4]", "(s42)+_TOOL", "x{2,}", "a*", "^pg_", "message$", "(?-i)Slack",
		"beta)", "[beta", "(beta)", `\(beta\)`, `tool\d+`, "kelvin.+SCALE",
	}
	for _, q := range queries {
		re, err := regexp.Compile("(?i)" + q)
		if err != nil {
			re = regexp.MustCompile("(?i)" + regexp.QuoteMeta(q))
		}
		m := newMatcher(q)
		for _, s := range texts {
			if got, want := m.match(s, casefold(s)), re.MatchString(s); got != want {
				t.Errorf("query %q on %q: matcher %v, regexp %v (lit %q)", q, s, got, want, m.lit)
			}
			if got, want := m.count(s, casefold(s)), len(re.FindAllStringIndex(s, -1)); got != want && m.re != nil {
				t.Errorf("query %q on %q: count %d, regexp %d", q, s, got, want)
			}
		}
	}
}
