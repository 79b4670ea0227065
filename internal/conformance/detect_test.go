package conformance

import (
	"strings"
	"testing"
)

// TestAccountsDetectAsClient runs auth/metadata-default with the
// scenario's server configured with no oauth block at all: its 401
// Bearer challenge must make it a connected-account server.
func TestAccountsDetectAsClient(t *testing.T) {
	entry := suiteEntry(t)
	bin := muxclientBinary(t)
	r := runAuthScenario(entry, bin, "auth/metadata-default", "-era", "2025-11-25", "-detect")
	logRun(t, r)
	if !r.passed {
		t.Errorf("%s did not pass with mcp-mux detecting the OAuth requirement (%q)", r.name, r.summary)
	}
	checkNoSecrets(t, r)
	for _, want := range authExpectations("2025-11-25", "auth/metadata-default") {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%s: muxclient did not say %q", r.name, want)
		}
	}
}
