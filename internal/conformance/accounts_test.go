package conformance

// The conformance client auth scenarios with mcp-mux as the OAuth client
// of the scenario's server (connected accounts, DESIGN §2.9): muxclient
// runs mcp-mux in process with the scenario's server as an
// authorization_code upstream, and a go-sdk client whose user approves
// each consent the mux asks for by opening its URL (the scenario's
// authorization server redirects straight to the mux's /oauth/callback).

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// authScenarios are the 0.1.16 authorization-code client scenarios.
var authScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/pre-registration",
}

// modernAuthScenarios also run with a 2026-07-28 client (its consents
// come as input_required results its retries answer).
var modernAuthScenarios = []string{"auth/metadata-default", "auth/scope-step-up", "auth/pre-registration", "auth/token-endpoint-auth-basic"}

// draftAuthScenarios are 0.2.0-alpha.12's client scenarios introduced at
// 2026-07-28 (their servers speak 2026-07-28), with what mcp-mux must do:
// connect and call, or refuse before any token request (the scenario
// passes only if the mux refused).
var draftAuthScenarios = map[string]draftOutcome{
	"auth/resource-mismatch":              refuses,
	"auth/offline-access-scope":           connects,
	"auth/offline-access-not-supported":   connects,
	"auth/authorization-server-migration": connects,
	"auth/iss-supported":                  connects,
	"auth/iss-not-advertised":             connects,
	"auth/iss-supported-missing":          refuses,
	"auth/iss-wrong-issuer":               refuses,
	"auth/iss-unexpected":                 refuses,
	"auth/iss-normalized":                 refuses,
	"auth/metadata-issuer-mismatch":       refuses,
}

// draftKnownFailing are draft scenarios mcp-mux does not pass yet, and
// why: they run and are logged, not asserted. (None today:
// authorization-server-migration passes since a per-user server's 401 to
// the mux's own discovery drops the connected token, so the user's next
// connect_account re-registers at the new authorization server.)
var draftKnownFailing = map[string]string{}

type draftOutcome int

const (
	connects draftOutcome = iota
	refuses
)

// secretMarkers must never appear in muxclient's output (the mux's log
// at debug level, its errors): the scenarios' client secrets, codes and
// tokens.
var secretMarkers = []string{"pre-registered-secret", "test-client-secret", "as1-client-secret", "as2-client-secret", "test-auth-code", "test-token-"}

// authRun is one client scenario run with muxclient as the client.
type authRun struct {
	name           string // scenario, and era or mode
	passed         bool   // every check passed, no warning, OVERALL: PASSED
	summary        string // the harness's "Passed: …" line
	output         string // the harness's output
	stdout, stderr string // muxclient's, as the harness kept them
	took           time.Duration
}

var passedLine = regexp.MustCompile(`Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings`)

// runAuthScenario runs scenario with the suite at entry and muxclient
// started with args.
func runAuthScenario(entry, bin, scenario string, args ...string) (r authRun) {
	r = authRun{name: scenario + " " + strings.Join(args, " ")}
	start := time.Now()
	defer func() { r.took = time.Since(start) }()
	dir, err := os.MkdirTemp("", "muxclient-run")
	if err != nil {
		r.output = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	command := strings.Join(append([]string{bin}, args...), " ")
	cmd := exec.CommandContext(ctx, "node", entry, "client", "--command", command, "--scenario", scenario, "-o", dir, "--timeout", "60000")
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(entry)))))
	out, _ := cmd.CombinedOutput()
	r.output = string(out)
	m := passedLine.FindStringSubmatch(r.output)
	if m != nil {
		r.summary = m[0]
		r.passed = m[1] == m[2] && m[1] != "0" && m[3] == "0" && m[4] == "0" && strings.Contains(r.output, "OVERALL: PASSED")
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			switch d.Name() {
			case "stdout.txt":
				r.stdout = string(b)
			case "stderr.txt":
				r.stderr = string(b)
			}
		}
		return nil
	})
	return r
}

// runAll runs each job at most six at a time (each is mostly waiting;
// the suite's scenarios listen on ephemeral ports) and returns the runs
// by job name.
func runAll(jobs map[string]func() authRun) map[string]authRun {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 6)
		runs = map[string]authRun{}
	)
	for name, job := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := job()
			mu.Lock()
			runs[name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return runs
}

// checkNoSecrets fails when a marker secret is in muxclient's output,
// and when there is no mux log to look in.
func checkNoSecrets(t *testing.T, r authRun) {
	t.Helper()
	if !strings.Contains(r.stderr, "server=upstream") {
		t.Errorf("%s: no mux log kept (stderr %q)", r.name, tail(r.stderr, 500))
	}
	for _, marker := range secretMarkers {
		if strings.Contains(r.stdout, marker) || strings.Contains(r.stderr, marker) {
			t.Errorf("%s: muxclient's output shows the secret %q", r.name, marker)
		}
	}
}

// logRun logs a run's outcome and, when it failed, its output.
func logRun(t *testing.T, r authRun) {
	t.Helper()
	t.Logf("%s: %s in %s\nmuxclient stdout:\n%s", r.name, r.summary, r.took.Round(100*time.Millisecond), r.stdout)
	if !r.passed {
		t.Logf("harness output:\n%s\nmuxclient stderr:\n%s", tail(r.output, 4000), tail(r.stderr, 3000))
	}
}

// TestAccountsAsClient runs the 0.1.16 authorization-code client
// scenarios with mcp-mux as the OAuth client: every one with a
// 2025-11-25 client (consent as a live URL elicitation inside the call),
// four with a 2026-07-28 client (an input_required the client's retry
// answers). The user connects with connect_account, then lists the
// upstream's tools and calls one; in scope-step-up that call gets 403
// insufficient_scope and a second consent, for the union of the scopes.
func TestAccountsAsClient(t *testing.T) {
	t.Parallel()
	entry := suiteEntry(t)
	bin := muxclientBinary(t)
	jobs := map[string]func() authRun{}
	for _, sc := range authScenarios {
		jobs["2025-11-25/"+sc] = func() authRun { return runAuthScenario(entry, bin, sc, "-era", "2025-11-25") }
	}
	for _, sc := range modernAuthScenarios {
		jobs["2026-07-28/"+sc] = func() authRun { return runAuthScenario(entry, bin, sc, "-era", "2026-07-28") }
	}
	start := time.Now()
	runs := runAll(jobs)
	t.Logf("%d scenario runs in %s", len(runs), time.Since(start).Round(time.Second))
	for name, r := range runs {
		era, sc, _ := strings.Cut(name, "/")
		t.Run(name, func(t *testing.T) {
			logRun(t, r)
			if !r.passed {
				t.Errorf("%s did not pass with mcp-mux as the OAuth client (%q)", r.name, r.summary)
			}
			checkNoSecrets(t, r)
			for _, want := range authExpectations(era, sc) {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("%s: muxclient did not say %q", r.name, want)
				}
			}
		})
	}
}

// authExpectations are what muxclient must print in a 0.1.16 scenario,
// beyond the harness's checks: the era it negotiated, the consents it
// approved, the upstream tool it called.
func authExpectations(era, scenario string) []string {
	want := []string{"connected to mcp-mux at protocol version " + era,
		`called connect_account through mcp-mux: Your account on MCP server "upstream" is connected.`}
	switch scenario {
	case "auth/scope-step-up":
		return append(want, "consent 2: the browser ended at /oauth/callback (200)", "called upstream_test-tool", "consents approved: 2")
	case "auth/scope-retry-limit":
		// Every request with a token gets 403 insufficient_scope
		// mcp:admin, the mux's own tool discovery too: no tool to call,
		// and no second consent.
		return append(want, "consents approved: 1")
	}
	return append(want, "called upstream_test-tool", "consents approved: 1")
}

// TestAccountsDraftScenariosAsClient runs 0.2.0-alpha.12's client auth
// scenarios introduced at 2026-07-28 (their servers speak 2026-07-28) with
// a 2026-07-28 client. Those mcp-mux passes must keep passing, and must
// pass for the right reason (connected and called, or refused before any
// token request); the known failures (draftKnownFailing) run and are
// logged.
func TestAccountsDraftScenariosAsClient(t *testing.T) {
	t.Parallel()
	entry := suiteEntryVersion(t, modernSuiteVersion)
	bin := muxclientBinary(t)
	jobs := map[string]func() authRun{}
	for sc := range draftAuthScenarios {
		jobs[sc] = func() authRun { return runAuthScenario(entry, bin, sc, "-era", "2026-07-28") }
	}
	start := time.Now()
	runs := runAll(jobs)
	t.Logf("%d scenario runs in %s", len(runs), time.Since(start).Round(time.Second))
	for sc, r := range runs {
		t.Run(sc, func(t *testing.T) {
			logRun(t, r)
			checkNoSecrets(t, r)
			if why, known := draftKnownFailing[sc]; known {
				t.Logf("KNOWN FAILING, not asserted (%s): passed=%v %s", why, r.passed, r.summary)
				return
			}
			if !r.passed {
				t.Errorf("%s did not pass with mcp-mux as the OAuth client (%q)", r.name, r.summary)
			}
			connected := strings.Contains(r.stdout, `Your account on MCP server "upstream" is connected.`)
			switch draftAuthScenarios[sc] {
			case connects:
				if !connected || !strings.Contains(r.stdout, "called upstream_test-tool") {
					t.Errorf("%s: the user did not connect and call the upstream's tool", r.name)
				}
				// The migration asks twice: at the first
				// authorization server, then at the second.
				want := "consents approved: 1"
				if sc == "auth/authorization-server-migration" {
					want = "consents approved: 2"
				}
				if !strings.Contains(r.stdout, want) {
					t.Errorf("%s: muxclient did not say %q", r.name, want)
				}
			case refuses:
				if connected || strings.Contains(r.stdout, "called upstream_test-tool") {
					t.Errorf("%s: mcp-mux connected the account it must refuse", r.name)
				}
			}
		})
	}
}
