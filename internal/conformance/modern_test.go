package conformance

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The frozen 2026-07-28 requirement set of the official suite, run through
// mcp-mux fronting the go-sdk everything-server once stateless (a
// 2026-07-28 upstream: mcp-mux negotiates the modern era with it) and once
// stateful (a 2025-11-25 upstream: mcp-mux bridges). Tasks-extension and
// pending scenarios run too but are not required; their counts are logged
// (the everything-server has none of the tasks fixtures: tasks_test.go runs
// them against a server that does).

const modernSuiteVersion = "0.2.0-alpha.12"

// requiredScenarios is how many scenarios the 2026-07-28 set requires.
const requiredScenarios = 37

var scenarioLine = regexp.MustCompile(`(?m)^([✓✗]) ([a-z0-9-]+): (\d+) passed, (\d+) failed`)

// modernResult is one run of the requirement set.
type modernResult struct {
	passed, failed []string // required scenarios
	optional       []string // not scored: extension and pending, as summary lines
}

func runModernSuite(t *testing.T, url string) modernResult {
	t.Helper()
	entry := suiteEntryVersion(t, modernSuiteVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", entry, "server", "--url", url, "--requirements", "2026-07-28")
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(entry)))))
	out, _ := cmd.CombinedOutput()
	s := string(out)
	i := strings.Index(s, "=== SUMMARY ===")
	if i < 0 {
		t.Fatalf("no summary from the conformance suite:\n%s", tail(s, 4000))
	}
	summary := s[i:]
	t.Logf("2026-07-28 requirement set:\n%s", summary)
	var notScored []string
	if j := strings.Index(summary, "Not scored for 2026-07-28"); j >= 0 {
		for _, m := range regexp.MustCompile(`(?m)^\s+[✓✗] ([a-z0-9-]+) \(`).FindAllStringSubmatch(summary[j:], -1) {
			notScored = append(notScored, m[1])
		}
	}
	var r modernResult
	for _, m := range scenarioLine.FindAllStringSubmatch(summary, -1) {
		if slices.Contains(notScored, m[2]) {
			r.optional = append(r.optional, m[0])
			continue
		}
		if m[1] == "✓" && m[4] == "0" {
			r.passed = append(r.passed, m[2])
		} else {
			r.failed = append(r.failed, m[2])
		}
	}
	if len(r.passed)+len(r.failed) != requiredScenarios {
		t.Fatalf("found %d required scenarios in the summary, want %d", len(r.passed)+len(r.failed), requiredScenarios)
	}
	t.Logf("required: %d of %d passed; not scored: %s", len(r.passed), requiredScenarios, strings.Join(r.optional, "; "))
	return r
}

func startEverythingHTTP(t *testing.T, stateless bool) string {
	t.Helper()
	bin := everythingServer(t)
	addr := freeAddr(t)
	up := exec.Command(bin, "-http", addr, fmt.Sprintf("-stateless=%v", stateless))
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Process.Kill(); _ = up.Wait() })
	waitListening(t, addr)
	return fmt.Sprintf("http://%s/mcp", addr)
}

func TestModernConformanceModernUpstream(t *testing.T) {
	up := startEverythingHTTP(t, true)
	url := startMux(t, fmt.Sprintf(`{"type": "http", "url": %q, "tool_name_prefix": false}`, up))
	if r := runModernSuite(t, url); len(r.failed) > 0 {
		t.Errorf("required scenarios failed through mcp-mux: %v", r.failed)
	}
}

// Through a legacy upstream one check cannot pass: the go-sdk server turns
// its own input requests (keyed "user_name") into live requests for a
// 2025-11-25 client, whose keys never reach the wire, so mcp-mux's
// input_required names them itself.
var legacyUpstreamLimits = []string{"input-required-result-basic-elicitation"}

func TestModernConformanceLegacyUpstream(t *testing.T) {
	up := startEverythingHTTP(t, false)
	url := startMux(t, fmt.Sprintf(`{"type": "http", "url": %q, "tool_name_prefix": false}`, up))
	if r := runModernSuite(t, url); !slices.Equal(r.failed, legacyUpstreamLimits) {
		t.Errorf("required scenarios failed through mcp-mux: %v, want only %v", r.failed, legacyUpstreamLimits)
	}
}

// Over stdio mcp-mux negotiates 2026-07-28 with the everything-server
// (server/discover on its first process) and serves the requirement set
// through it.
func TestModernConformanceModernStdioUpstream(t *testing.T) {
	bin := everythingServer(t)
	url := startMux(t, fmt.Sprintf(`{"type": "stdio", "command": %q, "tool_name_prefix": false}`, bin))
	if r := runModernSuite(t, url); len(r.failed) > 0 {
		t.Errorf("required scenarios failed through mcp-mux: %v", r.failed)
	}
}
