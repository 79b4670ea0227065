package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerCwd: a stdio server's cwd is an existing directory, a relative
// one taken from the config file's directory, kept absolute; one that does
// not exist, is a file or comes from an unset variable makes the server
// invalid with a problem naming the server and the field; on an http
// server it is ignored with a warning; it is part of the fingerprint
// (issue 39).
func TestServerCwd(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	load := func(server string, env map[string]string) *Config {
		t.Helper()
		path := filepath.Join(dir, "c.json")
		if err := os.WriteFile(path, []byte(`{"mcpServers": {"s": `+server+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path, LoadOptions{LookupEnv: envOf(env)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for written, want := range map[string]string{work: work, "work": work, "./work/": work, "": "", "$WORK": work} {
		cfg := load(`{"command": "x", "cwd": "`+written+`"}`, map[string]string{"WORK": work})
		if s := cfg.Server("s"); s == nil || s.Cwd != want {
			t.Errorf("cwd %q: server %+v, invalid %v; want cwd %q", written, s, cfg.Invalid, want)
		}
	}
	for written, want := range map[string]string{
		"missing":                     `s: cwd: "` + filepath.Join(dir, "missing") + `" does not exist (a relative cwd is taken from the config file's directory)`,
		filepath.Join(dir, "missing"): `s: cwd: "` + filepath.Join(dir, "missing") + `" does not exist`,
		"c.json":                      `s: cwd: "` + filepath.Join(dir, "c.json") + `" is not a directory (a relative cwd is taken from the config file's directory)`,
		"$UNSET_WORK":                 `s: cwd: is empty because the environment variable UNSET_WORK is not set; set it, or remove cwd to start the server in mcp-mux's working directory`,
	} {
		cfg := load(`{"command": "x", "cwd": "`+written+`"}`, nil)
		if len(cfg.Invalid) != 1 || cfg.Invalid[0].Error() != want {
			t.Errorf("cwd %q: invalid %v, want %q", written, cfg.Invalid, want)
		}
	}
	cfg := load(`{"type": "http", "url": "https://h/mcp", "cwd": "work"}`, nil)
	if s := cfg.Server("s"); s == nil || s.Cwd != "" || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), "cwd is ignored for this http server") {
		t.Errorf("http server with cwd: %+v, warnings %v", s, cfg.Warnings)
	}
	a, b := load(`{"command": "x"}`, nil).Server("s"), load(`{"command": "x", "cwd": "work"}`, nil).Server("s")
	if a.Fingerprint() == b.Fingerprint() {
		t.Error("a cwd does not change the fingerprint: a reload would not restart the server there")
	}
}
