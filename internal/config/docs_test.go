package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
	"github.com/mcp-mux/mcp-mux/internal/doctest"
)

// docConfigs returns the config examples of the README and the docs pages:
// their json, jsonc (comments stripped) and yaml blocks, less those marked
// as not a whole mcp-mux config.
func docConfigs(t *testing.T) []doctest.Block {
	t.Helper()
	pages, err := doctest.Pages()
	if err != nil {
		t.Fatal(err)
	}
	var out []doctest.Block
	for _, p := range pages {
		for _, b := range p.Blocks() {
			switch {
			case b.Lang != "json" && b.Lang != "jsonc" && b.Lang != "yaml":
			case b.Marker == "fragment" || b.Marker == "helm-values":
			default:
				if b.Lang == "jsonc" {
					b.Body = doctest.StripLineComments(b.Body)
				}
				out = append(out, b)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d config examples in the docs; the scan is broken", len(out))
	}
	return out
}

// TestDocsExamplesUseWholeStringVars: config values expand only when the
// whole string is one $VAR (DeerFlow's rule), so an example such as
// "Bearer $TOKEN" would be sent literally. No config example in the docs
// may show a $VAR inside a longer string.
func TestDocsExamplesUseWholeStringVars(t *testing.T) {
	quoted := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	embedded := regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)
	checked := 0
	for _, block := range docConfigs(t) {
		for _, m := range quoted.FindAllStringSubmatch(block.Body, -1) {
			v := m[1]
			if !embedded.MatchString(v) {
				continue
			}
			checked++
			n := &rawdoc.Node{Kind: rawdoc.String, Text: v}
			expandString(n, func(string) (string, bool) { return "x", true })
			if n.Value != "x" {
				t.Errorf("%s: config example %q is not a whole-string $VAR: it would be sent as written", block.Where(), v)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no $VAR in the docs' config examples; the scan is broken")
	}
}

// TestDocsToolOverrideExample: the tool override example of docs/tools.md
// loads and means what the page says.
func TestDocsToolOverrideExample(t *testing.T) {
	for _, block := range docConfigs(t) {
		if block.Page != "docs/tools.md" || !strings.Contains(block.Body, `"fixed_arguments"`) {
			continue
		}
		cfg := mustLoad(t, block.Body, map[string]string{"CRM_ACCOUNT": "acme"})
		ov := cfg.Server("crm").Tools["lookup"]
		if ov.Name != "find_customer" || *ov.Description != "Finds a customer by name." || string(ov.FixedArguments["account"]) != `"acme"` {
			t.Errorf("%s: override %+v", block.Where(), ov)
		}
		return
	}
	t.Fatal("docs/tools.md has no tool override example")
}

// keyRE finds in the source the keys the parser asks for: through the
// methods that read one key of an object, the root's Get, and the table
// of the mux blocks' readers ({"guardrails", (*Config).parseGuardrails}).
var keyRE = regexp.MustCompile(`(?:\.(?:take|str|secret|boolean|oneOf|strList|strMap|number|integer|intInRange|secondsInRange|timeout|present|has|headerName|share|optStr|optBool|taskTool)\(|root\.Get\()"([A-Za-z_]+)"|\{"([A-Za-z_]+)", \(\*Config\)`)

// parsedKeys returns every key the config parser reads, from this
// package's source.
func parsedKeys(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range keyRE.FindAllStringSubmatch(string(b), -1) {
			if k := m[1] + m[2]; !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) < 100 {
		t.Fatalf("found %d keys in the parser's source; the scan is broken", len(keys))
	}
	return keys
}

// referenceKeys returns the keys the first column of the reference's Key
// tables names, each with the line it is on.
func referenceKeys(t *testing.T) map[string]int {
	t.Helper()
	page, err := doctest.Load("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	out := map[string]int{}
	inKeys := false
	for _, r := range page.Rows() {
		first := r.Cells[0]
		if first == "Key" {
			inKeys = true
			continue
		}
		if len(r.Cells) > 0 && !strings.HasPrefix(first, "`") {
			if !strings.HasPrefix(first, "anything else") {
				inKeys = false
			}
			continue
		}
		if !inKeys {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(first, -1) {
			k := m[1]
			k = k[strings.LastIndex(k, ".")+1:]
			out[strings.TrimSuffix(k, "[]")] = r.Line
		}
	}
	return out
}

// TestConfigReferenceComplete: docs/configuration.md has a table row for
// every key the parser reads, and names no key it does not read.
func TestConfigReferenceComplete(t *testing.T) {
	documented := referenceKeys(t)
	keys := parsedKeys(t)
	for _, k := range keys {
		if _, ok := documented[k]; !ok {
			t.Errorf("the parser reads the key %q, which no table of docs/configuration.md lists", k)
		}
	}
	for k, line := range documented {
		if !slices.Contains(keys, k) && !strings.HasPrefix(k, "<") {
			t.Errorf("docs/configuration.md:%d lists the key %q, which the parser does not read", line, k)
		}
	}
}
