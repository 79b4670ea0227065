package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// TestReadmeExamplesUseWholeStringVars: config values expand only when the
// whole string is one $VAR (DeerFlow's rule), so an example such as
// "Bearer $TOKEN" would be sent literally. No config example in the README
// (its json, jsonc and yaml blocks) may show a $VAR inside a longer string.
func TestReadmeExamplesUseWholeStringVars(t *testing.T) {
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	embedded := regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)
	checked := 0
	for _, block := range configBlocks(string(doc)) {
		for _, m := range quoted.FindAllStringSubmatch(block, -1) {
			v := m[1]
			if !embedded.MatchString(v) {
				continue
			}
			checked++
			n := &rawdoc.Node{Kind: rawdoc.String, Text: v}
			expandString(n, func(string) (string, bool) { return "x", true })
			if n.Value != "x" {
				t.Errorf("README config example %q is not a whole-string $VAR: it would be sent as written", v)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no $VAR in the README's config examples; the scan is broken")
	}
}

// configBlocks returns the bodies of the json, jsonc and yaml code blocks
// of a Markdown document.
func configBlocks(doc string) []string {
	var out []string
	var cur *strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		fence := strings.TrimSpace(line)
		switch {
		case cur == nil && (fence == "```json" || fence == "```jsonc" || fence == "```yaml"):
			cur = &strings.Builder{}
		case cur != nil && fence == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}
