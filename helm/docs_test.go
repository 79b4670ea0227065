package helm

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcp-mux/mcp-mux/internal/doctest"
)

// kubernetesPage is the docs page the chart's examples are on.
const kubernetesPage = "docs/replicas-and-kubernetes.md"

// markedBlocks returns the blocks of the Kubernetes page marked name.
func markedBlocks(t *testing.T, name string) []doctest.Block {
	t.Helper()
	page, err := doctest.Load(kubernetesPage)
	if err != nil {
		t.Fatal(err)
	}
	var out []doctest.Block
	for _, b := range page.Blocks() {
		if b.Marker == name {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no block marked <!-- %s -->", kubernetesPage, name)
	}
	return out
}

// TestDocsHelmExamples: the Kubernetes page's Helm examples are what the
// chart runs. A values block marked <!-- helm-values: FILE --> means what
// FILE (relative to the repository root) says, comments and layout aside;
// the `helm install` example's values, with its --set flags, render a
// chart that decodes strictly, with the replicas and the config it shows.
func TestDocsHelmExamples(t *testing.T) {
	root, err := doctest.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range markedBlocks(t, "helm-values") {
		file, err := os.ReadFile(root + "/" + b.MarkerText)
		if err != nil {
			t.Fatalf("%s: %v", b.Where(), err)
		}
		var want, got any
		if err := yaml.Unmarshal(file, &want); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(b.Body), &got); err != nil {
			t.Fatalf("%s: %v", b.Where(), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s says other values than %s:\n%s", b.Where(), b.MarkerText, b.Body)
		}
	}

	for _, b := range markedBlocks(t, "helm-install") {
		_, heredoc, ok := strings.Cut(b.Body, "<<'YAML'\n")
		heredoc, _, ok2 := strings.Cut(heredoc, "\nYAML\n")
		if !ok || !ok2 {
			t.Fatalf("%s: no <<'YAML' … YAML values", b.Where())
		}
		values := map[string]any{}
		if err := yaml.Unmarshal([]byte(heredoc), &values); err != nil {
			t.Fatalf("%s: %v", b.Where(), err)
		}
		for _, m := range regexp.MustCompile(`--set ([A-Za-z]+)=(\S+)`).FindAllStringSubmatch(b.Body, -1) {
			values[m[1]] = m[2]
		}
		out, err := render(t, chartDir(), values)
		if err != nil {
			t.Fatalf("%s does not render: %v", b.Where(), err)
		}
		o := decode(t, out)
		if len(o.deployments) != 1 {
			t.Fatalf("%s rendered %v, want one Deployment", b.Where(), o.kinds())
		}
		dep := o.deployments[0]
		if want, _ := values["replicas"].(float64); dep.Spec.Replicas == nil || float64(*dep.Spec.Replicas) != want {
			t.Errorf("%s: replicas %v, want %v", b.Where(), dep.Spec.Replicas, values["replicas"])
		}
		checkMuxContainer(t, &dep.Spec.Template.Spec, o.configMaps[0].Name)
		cfg := checkConfig(t, o.configMaps[0], map[string]string{"KEY_ALICE": "key-alice", "REDIS_URL": "redis://redis:6379/0"})
		if len(cfg.Invalid) > 0 || cfg.Server("docs") == nil || cfg.Store.RedisURL.IsZero() {
			t.Errorf("%s: the rendered config is not the page's: %+v", b.Where(), cfg)
		}
	}
}
