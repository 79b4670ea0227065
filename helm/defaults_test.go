package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// defaultKey is the API key variable the chart configures when a
// Deployment's config names no caller identity.
const defaultKey = "$MCP_MUX_API_KEY"

// TestDefaultValues: a newcomer's first `helm template` of the chart with
// its default values renders a Deployment, its Service and a config that
// fails closed — API keys, one key read from MCP_MUX_API_KEY: with the
// variable set the mux accepts the config, without it the mux refuses to
// start, naming the key.
func TestDefaultValues(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{})
	if err != nil {
		t.Fatalf("the default values do not render: %v", err)
	}
	o := decode(t, out)
	if got, want := o.kinds(), []string{"ConfigMap", "Deployment", "Service"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	cm := o.configMaps[0]
	checkMuxContainer(t, &o.deployments[0].Spec.Template.Spec, cm.Name)
	cfg := checkConfig(t, cm, map[string]string{"MCP_MUX_API_KEY": "k-0123456789"})
	if a := cfg.Inbound.Auth; a.Mode != "api_keys" || len(a.Keys) != 1 || a.Keys["default"].Reveal() != "k-0123456789" || a.AllowRemote {
		t.Errorf("default auth %+v, want api_keys with the one key from MCP_MUX_API_KEY", a)
	}
	if _, err := config.Parse([]byte(cm.Data["extensions_config.json"]), config.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }}); err == nil ||
		!strings.Contains(err.Error(), "API key must not be empty") {
		t.Errorf("without MCP_MUX_API_KEY the config loads (%v); the mux must refuse to start", err)
	}
}

// TestDefaultAuthFailsClosed: a Deployment whose config names no auth mode
// (absent, null or emptied blocks included) gets the default key; api_keys
// without keys gets it too; keys, another mode or a sidecar (on loopback,
// mode none) are left as they are.
func TestDefaultAuthFailsClosed(t *testing.T) {
	withAuth := func(auth any) map[string]any { return map[string]any{"inbound": map[string]any{"auth": auth}} }
	for _, tc := range []struct {
		name     string
		values   map[string]any
		mode     string
		keys     map[string]string // as written, before $VAR expansion
		sidecar  bool
		wantNone bool
	}{
		{name: "a null config", values: map[string]any{"config": nil}, mode: "api_keys", keys: map[string]string{"default": defaultKey}},
		{name: "a null inbound", values: map[string]any{"config": map[string]any{"inbound": nil}}, mode: "api_keys", keys: map[string]string{"default": defaultKey}},
		{name: "a null auth", values: map[string]any{"config": withAuth(nil)}, mode: "api_keys", keys: map[string]string{"default": defaultKey}},
		{name: "auth without a mode", values: map[string]any{"config": withAuth(map[string]any{"allow_remote": false})}, mode: "api_keys", keys: map[string]string{"default": defaultKey}},
		{name: "api_keys without keys", values: map[string]any{"config": withAuth(map[string]any{"mode": "api_keys"})}, mode: "api_keys", keys: map[string]string{"default": defaultKey}},
		{name: "api_keys with keys", values: map[string]any{"config": withAuth(map[string]any{"mode": "api_keys", "keys": map[string]any{"alice": "$KEY_ALICE"}})},
			mode: "api_keys", keys: map[string]string{"alice": "$KEY_ALICE"}},
		{name: "trusted_header", values: map[string]any{"config": withAuth(map[string]any{"mode": "trusted_header"})}, mode: "trusted_header"},
		{name: "sidecar", values: map[string]any{"mode": "sidecar"}, sidecar: true, wantNone: true},
		{name: "sidecar with a null config", values: map[string]any{"mode": "sidecar", "config": nil}, sidecar: true, wantNone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, chartDir(), tc.values)
			if err != nil {
				t.Fatal(err)
			}
			o := decode(t, out)
			if (len(o.deployments) == 0) != tc.sidecar {
				t.Fatalf("objects %v", o.kinds())
			}
			var raw struct {
				Inbound struct {
					Auth struct {
						Mode string            `json:"mode"`
						Keys map[string]string `json:"keys"`
					} `json:"auth"`
				} `json:"inbound"`
			}
			if err := json.Unmarshal([]byte(o.configMaps[0].Data["extensions_config.json"]), &raw); err != nil {
				t.Fatal(err)
			}
			a := raw.Inbound.Auth
			if tc.wantNone {
				if a.Mode != "" || a.Keys != nil {
					t.Errorf("a sidecar's auth was set: %+v", a)
				}
				return
			}
			if a.Mode != tc.mode || !equalMaps(a.Keys, tc.keys) {
				t.Errorf("auth %+v, want mode %q keys %v", a, tc.mode, tc.keys)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// helmRun runs helm with args in a scratch home and returns its combined
// output and error.
func helmRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// TestLintClean: `helm lint` of the chart, with its defaults and in
// sidecar mode, passes without a failure line: a chart whose defaults do
// not render used to print "[INFO] Fail: …" and then "0 chart(s) failed".
func TestLintClean(t *testing.T) {
	for _, extra := range [][]string{nil, {"--set", "mode=sidecar"}, {"--strict"}} {
		out, err := helmRun(t, append([]string{"lint", chartDir()}, extra...)...)
		if err != nil || strings.Contains(out, "Fail") || strings.Contains(out, "[ERROR]") || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm lint %v: %v\n%s", extra, err, out)
		}
	}
}

// notes renders the chart's NOTES.txt with values: helm template leaves
// NOTES.txt out, so a copy of the chart carries it as a manifest too.
func notes(t *testing.T, values map[string]any) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mcp-mux")
	copyDir(t, chartDir(), dir)
	text, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	probe := `{{- define "test.notes" -}}` + string(text) + "{{- end -}}\napiVersion: v1\nkind: Notes\ntext: {{ include \"test.notes\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-probe.yaml"), []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	vals, _ := json.Marshal(values)
	vf := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(vf, vals, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helmRun(t, "template", "rel", dir, "--namespace", "agents", "--values", vf, "--show-only", "templates/notes-probe.yaml")
	if err != nil {
		t.Fatalf("rendering NOTES.txt: %v\n%s", err, out)
	}
	var doc struct{ Text string }
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(out), "---")), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return doc.Text
}

// TestNotes: the notes after an install say how callers authenticate with
// the default key and how to set it, and — the chart's image is not
// published — how to build and push it; a sidecar's say how to add it.
func TestNotes(t *testing.T) {
	def := notes(t, map[string]any{})
	for _, want := range []string{
		"http://rel-mcp-mux.agents.svc:8931/mcp",
		"MCP_MUX_API_KEY", "Authorization: Bearer <key>",
		"kubectl -n agents create secret generic mux-secrets --from-literal=MCP_MUX_API_KEY=",
		"--set envFromSecret=mux-secrets",
		"images are not published", "docker build -t <registry>/mcp-mux:0.1.0 --build-arg VERSION=0.1.0 .\n",
		"docker push <registry>/mcp-mux:0.1.0", "image.repository=<registry>/mcp-mux",
	} {
		if !strings.Contains(def, want) {
			t.Errorf("default notes lack %q:\n%s", want, def)
		}
	}
	own := notes(t, map[string]any{"envFromSecret": "s", "image": map[string]any{"repository": "r.example/mcp-mux"},
		"config": map[string]any{"inbound": map[string]any{"auth": map[string]any{"mode": "jwt", "jwks_url": "https://idp/jwks"}}}})
	for _, absent := range []string{"MCP_MUX_API_KEY", "docker build"} {
		if strings.Contains(own, absent) {
			t.Errorf("notes with their own auth and image mention %q:\n%s", absent, own)
		}
	}
	node := notes(t, map[string]any{"mode": "sidecar", "image": map[string]any{"tag": "0.1.0-node"}})
	for _, want := range []string{"Sidecar mode", "include \"mcp-mux.container\"", "--target node"} {
		if !strings.Contains(node, want) {
			t.Errorf("sidecar notes lack %q:\n%s", want, node)
		}
	}
	if strings.Contains(node, "MCP_MUX_API_KEY") {
		t.Errorf("a sidecar's notes ask for a key:\n%s", node)
	}
}
