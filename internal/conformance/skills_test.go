package conformance

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// The skills extension's server scenarios (SEP-2640, conformance
// 0.2.0-alpha.12) through mcp-mux fronting two skill servers (go-sdk
// fixtures, internal/mcptest/skills.go), each with a prefix: the mux's
// merged skills/list, its skills/get, resources/read and
// resources/directory/read must meet the extension as one server would.
// Run on 2026-07-28 (the suite's default for an extension) and on
// 2025-11-25, against upstreams of either era.

var skillScenarios = []string{"sep-2640-skills-directory", "sep-2640-skills-enumeration", "sep-2640-skills-manifest"}

// minPassed is how many checks each scenario passes when nothing is
// skipped but the cache attributes a 2025-11-25 client does not get (the
// skip rules of an undeclared extension would pass none).
var minPassed = map[string]int{"sep-2640-skills-directory": 7, "sep-2640-skills-enumeration": 30, "sep-2640-skills-manifest": 6}

// skillsMuxURL serves mcp-mux fronting two fixture skill servers whose
// protocol_version is upstreamEra.
func skillsMuxURL(t *testing.T, upstreamEra string) string {
	t.Helper()
	alpha := mcptest.NewSkillsServer("alpha",
		mcptest.FixtureSkill{Name: "pdf-tools", Description: "Extract, fill, and assemble PDF documents",
			Files: []mcptest.SkillFile{{Path: "templates/form.md", Text: "# Form\n"}, {Path: "README.md", Text: "read me\n"}}})
	beta := mcptest.NewSkillsServer("beta",
		mcptest.FixtureSkill{Name: "code-review", Description: "Review a change for bugs and style",
			Files: []mcptest.SkillFile{{Path: "checklists/go.md", Text: "- errors wrapped\n"}}})
	ua, ub := mcptest.ServeHTTPBothEras(t, alpha.Server), mcptest.ServeHTTPBothEras(t, beta.Server)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {
	    "alpha": {"type": "http", "url": %q, "protocol_version": %q},
	    "beta": {"type": "http", "url": %q, "protocol_version": %q}}}`, ua.URL+"/mcp", upstreamEra, ub.URL+"/mcp", upstreamEra)),
		config.LoadOptions{Filename: "skills.json"})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	srv := proxy.New(proxy.Options{})
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
	})
	return ts.URL + "/mcp"
}

// scenarioResults is the result line of one scenario's run.
var scenarioResults = regexp.MustCompile(`Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings`)

// runScenario runs one server scenario at url (args: more flags) and
// returns its result line's counts and the whole output.
func runScenario(t *testing.T, entry, url, scenario string, args ...string) (passed, failed, warnings int, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{entry, "server", "--url", url, "--scenario", scenario}, args...)...)
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(entry)))))
	b, _ := cmd.CombinedOutput()
	out = string(b)
	m := scenarioResults.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no results from the conformance suite:\n%s", scenario, tail(out, 4000))
	}
	passed, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[3])
	warnings, _ = strconv.Atoi(m[4])
	return passed, failed, warnings, out
}

func TestSkillsScenariosThroughMux(t *testing.T) {
	entry := suiteEntryVersion(t, modernSuiteVersion)
	for _, upEra := range []string{"2026-07-28", "2025-11-25"} {
		url := skillsMuxURL(t, upEra)
		for _, clientEra := range []string{"2026-07-28", "2025-11-25"} {
			for _, sc := range skillScenarios {
				t.Run(fmt.Sprintf("upstream %s/client %s/%s", upEra, clientEra, sc), func(t *testing.T) {
					passed, failed, warnings, out := runScenario(t, entry, url, sc, "--spec-version", clientEra, "--force")
					if failed != 0 || warnings != 0 || passed < minPassed[sc] {
						t.Errorf("%s: %d passed (want at least %d), %d failed, %d warnings:\n%s", sc, passed, minPassed[sc], failed, warnings, tail(out, 6000))
					}
					t.Logf("%s: %d passed", sc, passed)
				})
			}
		}
	}
}
