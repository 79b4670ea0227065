package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	r := runMux(t, t.TempDir(), nil, "version")
	if r.code != 0 || r.stdout != "mcp-mux "+testVersion+"\n" {
		t.Fatalf("version: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// In-process: the unstamped version is "dev".
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &stdout, &stderr, noEnv); code != 0 || stdout.String() != "mcp-mux dev\n" {
		t.Fatalf("run version: code %d, stdout %q", code, stdout.String())
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout bool // usage on stdout rather than stderr
	}{
		{nil, 2, false},
		{[]string{"frobnicate"}, 2, false},
		{[]string{"help"}, 0, true},
		{[]string{"--help"}, 0, true},
		{[]string{"-h"}, 0, true},
		{[]string{"help", "serve"}, 0, true},
		{[]string{"serve", "--help"}, 0, true},
		{[]string{"validate", "--help"}, 0, true},
		{[]string{"validate", "a.json", "b.json"}, 2, false},
		{[]string{"serve", "--no-such-flag"}, 2, false},
		{[]string{"serve", "extra-arg"}, 2, false},
		{[]string{"serve", "--log-format", "xml"}, 2, false},
		{[]string{"serve", "--log-level", "loud"}, 2, false},
		{[]string{"validate"}, 2, false},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr, noEnv)
		if code != tc.code {
			t.Errorf("%q: code %d, want %d (stderr %q)", tc.args, code, tc.code, stderr.String())
		}
		out := stderr.String()
		if tc.stdout {
			out = stdout.String()
		}
		if out == "" {
			t.Errorf("%q: no message", tc.args)
		}
		if tc.stdout && stderr.Len() > 0 {
			t.Errorf("%q: help on stderr too: %q", tc.args, stderr.String())
		}
	}
	var stdout bytes.Buffer
	run(context.Background(), []string{"--help"}, &stdout, io.Discard, noEnv)
	for _, cmd := range []string{"serve ", "validate ", "version ", "help "} {
		if !strings.Contains(stdout.String(), "\n  "+cmd) {
			t.Errorf("--help lacks the %q command:\n%s", cmd, stdout.String())
		}
	}
}

// TestValidatePrintsWhatServeWarns: validate PATH (no --config) prints
// every warning serve logs for the same file — near-miss keys with the
// likely key, an unset $VAR in env (never a value), a skipped interceptor.
func TestValidatePrintsWhatServeWarns(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "typos.json", `{
  "mcpServer": {},
  "mcpInterceptors": ["audit", "deerflow.interceptors.Custom"],
  "mcpServers": {
    "a": {"command": "/bin/true", "enabeld": false, "tool_call_timout": 5, "cwd": "/tmp",
          "env": {"TOKEN": "$MUX_CLI_UNSET", "OK": "$MUX_CLI_SET"}}
  }
}`)
	env := envMap(map[string]string{"MUX_CLI_SET": "value-never-printed"})
	var vout, verr bytes.Buffer
	if code := run(context.Background(), []string{"validate", path}, &vout, &verr, env); code != 0 {
		t.Fatalf("validate: code %d\n%s", code, verr.String())
	}
	got := verr.String()
	for _, want := range []string{
		`mcpServer: unknown top-level key, kept but not used; did you mean "mcpServers"?`,
		`a:enabeld: unknown key, kept but not used; did you mean "enabled"?`,
		`a:tool_call_timout: unknown key, kept but not used; did you mean "tool_call_timeout"?`,
		`a:env.TOKEN: $MUX_CLI_UNSET is not set`,
		`deerflow.interceptors.Custom`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "value-never-printed") {
		t.Errorf("validate printed a variable's value:\n%s", got)
	}

	var serr strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve returns as soon as it is up
	if code := run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--config", path}, nil, &serr, env); code != 0 {
		t.Fatalf("serve: code %d\n%s", code, serr.String())
	}
	warned := 0
	for _, l := range logLines(serr.String()) {
		msg, _ := l["@message"].(string)
		if l["@level"] != "warn" || !(strings.HasPrefix(msg, "config: ") || msg == "skipping interceptor") {
			continue
		}
		warned++
		text := strings.TrimPrefix(msg, "config: ")
		if r, ok := l["reason"].(string); ok {
			text = r
		}
		// serve says "server: field: message", validate "file:server:field: message".
		if i := strings.LastIndex(text, ": "); i >= 0 {
			text = text[i+2:]
		}
		if !strings.Contains(got, text) {
			t.Errorf("serve warned %q, which validate did not print:\n%s", text, got)
		}
	}
	if warned < 5 {
		t.Errorf("serve logged %d config warnings, want at least 5:\n%s", warned, serr.String())
	}
}

// TestDefaultLogFormat: JSON when stderr is not a terminal, text on a
// terminal (a pseudo-terminal here), --log-format wins.
func TestDefaultLogFormat(t *testing.T) {
	f, err := parseServe([]string{}, io.Discard, io.Discard, noEnv)
	if err != nil || f.logFormat != "json" {
		t.Errorf("not a terminal: %+v %v", f, err)
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Fatal("a pseudo-terminal is not a terminal")
	}
	if f, err := parseServe([]string{}, io.Discard, pty, noEnv); err != nil || f.logFormat != "text" {
		t.Errorf("terminal: %+v %v", f, err)
	}
	if f, err := parseServe([]string{"--log-format", "json"}, io.Discard, pty, noEnv); err != nil || f.logFormat != "json" {
		t.Errorf("terminal with --log-format json: %+v %v", f, err)
	}
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	if isTerminal(null) {
		t.Error("/dev/null is not a terminal")
	}
}

func noEnv(string) (string, bool) { return "", false }

func TestValidateGood(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "extensions_config.json", `{
  "mcpInterceptors": ["audit"],
  "mcpServers": {
    "files": {"type": "stdio", "command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "$SOME_TOKEN"}},
    "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Api-Key": "$SOME_TOKEN"}},
    "legacy": {"enabled": false, "transport": "sse", "url": "http://127.0.0.1:1/sse"}
  },
  "skills": {"whatever": true},
  "guardrails": {"denied_tools": ["web_delete"]},
  "inbound": {"thread_header": "X-Thread"}
}`)
	r := runMux(t, dir, []string{"SOME_TOKEN=tok-1"}, "validate", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("validate: code %d, stderr:\n%s", r.code, r.stderr)
	}
	if want := cfg + ": ok, 3 server(s), 2 enabled\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	if r.stderr != "" {
		t.Errorf("unexpected stderr:\n%s", r.stderr)
	}

	// A header from an unset variable skips its server, naming both.
	r = runMux(t, dir, nil, "validate", "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "web:headers.X-Api-Key") || !strings.Contains(r.stderr, "$SOME_TOKEN, which is not set") {
		t.Errorf("validate with SOME_TOKEN unset: code %d, stderr:\n%s", r.code, r.stderr)
	}

	// YAML by extension.
	yml := writeFile(t, dir, "config.yaml", `
mcpServers:
  files:
    command: npx
    args: ["-y", "some-server"]
  web:
    type: http
    url: http://127.0.0.1:1/mcp
`)
	r = runMux(t, dir, nil, "validate", "--config", yml)
	if r.code != 0 || r.stdout != yml+": ok, 2 server(s), 2 enabled\n" {
		t.Fatalf("validate yaml: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestValidateInvalidServer(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{
  "mcpServers": {
    "good": {"command": "echo"},
    "nourl": {"type": "http"},
    "ftp": {"type": "http", "url": "ftp://example.invalid/x"},
    "nocmd": {"type": "stdio"}
  }
}`)
	r := runMux(t, dir, nil, "validate", "--config", cfg)
	if r.code != 1 {
		t.Fatalf("code %d, want 1; stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	want := []string{
		cfg + ":nourl:url: http transport requires 'url' field",
		cfg + ":ftp:url: must be an absolute http or https URL",
		cfg + ":nocmd:command: stdio transport requires 'command' field",
		cfg + ": 3 invalid server(s); 1 valid (1 enabled)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, strings.Join(want, "\n"))
	}
	// Every problem line has the file:server:field: message shape.
	shape := regexp.MustCompile(`^` + regexp.QuoteMeta(cfg) + `:[a-z]+:[a-z]+: \S`)
	for _, l := range lines[:len(lines)-1] {
		if !shape.MatchString(l) {
			t.Errorf("line %q is not file:server:field: message", l)
		}
	}
}

func TestValidateTopLevelProblem(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"mcpServers": {}, "tool_search": {"enabled": "yes", "bogus": 1}}`)
	for _, args := range [][]string{{"validate", "--config", cfg}, {"serve", "--config", cfg, "--listen", "127.0.0.1:0"}} {
		r := runMux(t, dir, nil, args...)
		if r.code != 1 {
			t.Fatalf("%s: code %d, want 1; stderr %q", args[0], r.code, r.stderr)
		}
		for _, want := range []string{cfg + ":tool_search.enabled: must be a boolean", cfg + ":tool_search.bogus: unknown key"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", args[0], want, r.stderr)
			}
		}
	}
}

func TestValidateSyntaxErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		where         *regexp.Regexp // after the file name
	}{
		{"bad.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n", regexp.MustCompile(`^:3:\d+: `)},
		{"bad.yaml", "mcpServers:\n  a:\n    command: [x\n  b: 1\n", regexp.MustCompile(`^:\d+(:\d+)?: `)},
		{"bad.yml", "mcpServers:\n  a: {command: x\n\tb: 1\n", regexp.MustCompile(`^:\d+(:\d+)?: `)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, tc.name, tc.content)
			for _, args := range [][]string{{"validate", "--config", path}, {"serve", "--config", path, "--listen", "127.0.0.1:0"}} {
				r := runMux(t, dir, nil, args...)
				if r.code != 1 {
					t.Fatalf("%s: code %d, want 1; stderr %q", args[0], r.code, r.stderr)
				}
				out := strings.TrimSpace(r.stderr)
				rest, ok := strings.CutPrefix(out, path)
				if !ok || !tc.where.MatchString(rest) {
					t.Errorf("%s: stderr %q, want %s followed by %s", args[0], out, path, tc.where)
				}
			}
		})
	}
}

func TestServeMissingConfig(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.json")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"serve", "--config", missing, "--listen", "127.0.0.1:0"}},
		{"env", []string{"MCP_MUX_CONFIG=" + missing, "MCP_MUX_LISTEN=127.0.0.1:0"}, []string{"serve"}},
		{"validate-env", []string{"MCP_MUX_CONFIG=" + missing}, []string{"validate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runMux(t, dir, tc.env, tc.args...)
			if r.code != 1 {
				t.Fatalf("code %d, want 1; stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, missing) {
				t.Errorf("stderr does not name the file:\n%s", r.stderr)
			}
		})
	}
}

func TestValidateEnvFallback(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"mcpServers": {"a": {"command": "echo"}}}`)
	r := runMux(t, dir, []string{"MCP_MUX_CONFIG=" + cfg}, "validate")
	if r.code != 0 || r.stdout != cfg+": ok, 1 server(s), 1 enabled\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// --config wins over the environment.
	r = runMux(t, dir, []string{"MCP_MUX_CONFIG=" + filepath.Join(dir, "nope.json")}, "validate", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("--config did not override MCP_MUX_CONFIG: code %d, stderr %q", r.code, r.stderr)
	}
}

// TestValidateNeverPrintsSecrets: a header value that fails validation is
// reported by name, never by value.
func TestValidateNeverPrintsSecrets(t *testing.T) {
	const secret = "s3cr3t-validate-7b1e9f"
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"mcpServers": {
  "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Api-Key": "$BAD_SECRET"}},
  "store_user": {"type": "http", "url": "$BAD_URL"}
}, "store": {"redis_url": "$BAD_URL"}}`)
	r := runMux(t, dir, []string{"BAD_SECRET=line1\n" + secret, "BAD_URL=ftp://user:" + secret + "@host/"}, "validate", "--config", cfg)
	if r.code != 1 {
		t.Fatalf("code %d, want 1; stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, cfg+":web:headers.X-Api-Key:") {
		t.Errorf("the bad header is not reported:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("validate printed a secret value:\n%s", r.stderr)
	}
}

// TestAdminTokenUnsetFailsClosed: an admin.token whose $VAR is unset would
// turn the admin API off and leave /api/status open; validate and serve
// both refuse the file, naming the variable.
func TestAdminTokenUnsetFailsClosed(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"mcpServers": {}, "admin": {"token": "$MUX_TEST_ADMIN_TOKEN"}}`)
	for _, args := range [][]string{{"validate", cfg}, {"serve", "--config", cfg, "--listen", "127.0.0.1:0"}} {
		r := runMux(t, dir, nil, args...)
		if r.code != 1 {
			t.Fatalf("%s: code %d, want 1; stderr %q", args[0], r.code, r.stderr)
		}
		if want := "admin.token: is empty because the environment variable MUX_TEST_ADMIN_TOKEN is not set"; !strings.Contains(r.stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", args[0], want, r.stderr)
		}
	}
}

// TestValidateWarnsBesideTopLevelProblems: a failing mux block does not
// hide the file's warnings (near-miss keys, unset env variables).
func TestValidateWarnsBesideTopLevelProblems(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"mcpServers": {"a": {"command": "/bin/true", "enabeld": false, "env": {"T": "$MUX_CLI_UNSET"}}},
		"mcpServer": {}, "tool_search": {"enabled": "yes"}}`)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"validate", cfg}, &out, &errOut, noEnv); code != 1 {
		t.Fatalf("code %d, want 1:\n%s", code, errOut.String())
	}
	for _, want := range []string{
		cfg + ":tool_search.enabled: must be a boolean",
		`warning: ` + cfg + `:mcpServer: unknown top-level key, kept but not used; did you mean "mcpServers"?`,
		`a:enabeld: unknown key, kept but not used; did you mean "enabled"?`,
		`a:env.T: $MUX_CLI_UNSET is not set`,
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, errOut.String())
		}
	}
}

// TestStoreURLNeverShown (issue 34): a store URL go-redis refuses (an
// unknown parameter in cluster mode) stops validate and serve with a
// message naming the problem, and neither prints the URL's password.
func TestStoreURLNeverShown(t *testing.T) {
	const pw = "Sup3r-Redis-Pw"
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.json", `{"mcpServers": {}, "store": {"redis_mode": "cluster",
	  "redis_url": "redis://mux:`+pw+`@127.0.0.1:1?addr=127.0.0.1:2&bogus_option=`+pw+`"}}`)
	for _, args := range [][]string{{"validate", "--config", cfg}, {"serve", "--config", cfg, "--listen", "127.0.0.1:0"}} {
		r := runMux(t, dir, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "not a valid cluster URL") {
			t.Fatalf("%s: code %d, want 1 naming the bad cluster URL; stderr %q", args[0], r.code, r.stderr)
		}
		if strings.Contains(r.stderr+r.stdout, pw) {
			t.Fatalf("%s printed the store URL's password:\n%s", args[0], r.stderr)
		}
	}
}
