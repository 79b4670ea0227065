// Package helm holds the chart's tests: they render helm/mcp-mux with the
// real helm binary for both modes and several value sets, decode every
// object strictly into the Kubernetes API types, and check what matters to
// the mux: mounts, probes, security settings, listen addresses, the config.
package helm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// helmVersion is the helm release the tests render with; .ci/run installs
// the same one into the same place.
const helmVersion = "v3.22.0"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBin returns the helm binary: $MCP_MUX_HELM, else the one installed in
// the user cache dir (by .ci/run, or here with go install on first use).
func helmBin(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("MCP_MUX_HELM"); p != "" {
			helmPath = p
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			helmErr = err
			return
		}
		dir := filepath.Join(cache, "mcp-mux", "helm-"+helmVersion)
		helmPath = filepath.Join(dir, "helm")
		if _, err := os.Stat(helmPath); err == nil {
			return
		}
		t.Logf("building helm %s into %s (once; .ci/run does this ahead of the tests)", helmVersion, dir)
		cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("go install helm %s: %v\n%s", helmVersion, err, out)
		}
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// render runs helm template on chart with values and returns its stdout, or
// the error helm printed.
func render(t *testing.T, chart string, values any) (string, error) {
	t.Helper()
	vals, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(vf, vals, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helmBin(t), "template", "rel", chart, "--namespace", "agents", "--values", vf)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart sets (the CRD's Go types are not in k8s.io/api).
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// objects are the rendered objects, by kind.
type objects struct {
	configMaps      []*corev1.ConfigMap
	services        []*corev1.Service
	deployments     []*appsv1.Deployment
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*serviceMonitor
}

func (o *objects) kinds() []string {
	var k []string
	add := func(name string, n int) {
		for range n {
			k = append(k, name)
		}
	}
	add("ConfigMap", len(o.configMaps))
	add("Deployment", len(o.deployments))
	add("PodDisruptionBudget", len(o.pdbs))
	add("Service", len(o.services))
	add("ServiceMonitor", len(o.serviceMonitors))
	return k
}

// strict decodes JSON into v, refusing fields v does not have.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// decode splits helm's output into documents and decodes each strictly
// into its API type; an unknown kind or field fails the test.
func decode(t *testing.T, out string) *objects {
	t.Helper()
	o := &objects{}
	for doc := range strings.SplitSeq(out, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if string(js) == "null" {
			continue // a template that rendered only comments
		}
		var head struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &head); err != nil {
			t.Fatal(err)
		}
		var target any
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			v := &corev1.ConfigMap{}
			o.configMaps, target = append(o.configMaps, v), v
		case "v1 Service":
			v := &corev1.Service{}
			o.services, target = append(o.services, v), v
		case "apps/v1 Deployment":
			v := &appsv1.Deployment{}
			o.deployments, target = append(o.deployments, v), v
		case "policy/v1 PodDisruptionBudget":
			v := &policyv1.PodDisruptionBudget{}
			o.pdbs, target = append(o.pdbs, v), v
		case "monitoring.coreos.com/v1 ServiceMonitor":
			v := &serviceMonitor{}
			o.serviceMonitors, target = append(o.serviceMonitors, v), v
		default:
			t.Fatalf("unexpected object %s %s:\n%s", head.APIVersion, head.Kind, doc)
		}
		if err := strict(js, target); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", head.Kind, err, doc)
		}
	}
	return o
}

func chartDir() string { return "mcp-mux" }

// muxContainer returns the pod's mcp-mux container.
func muxContainer(t *testing.T, pod *corev1.PodSpec) *corev1.Container {
	t.Helper()
	for i := range pod.Containers {
		if pod.Containers[i].Name == "mcp-mux" {
			return &pod.Containers[i]
		}
	}
	t.Fatalf("no mcp-mux container in %v", pod.Containers)
	return nil
}

func envOf(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// checkMuxContainer asserts what every mcp-mux container must have, in
// either mode: the config directory mounted from the ConfigMap (never a
// subPath), writable scratch, probes on a declared port, the locked-down
// security context, resources.
func checkMuxContainer(t *testing.T, pod *corev1.PodSpec, configMap string) *corev1.Container {
	t.Helper()
	c := muxContainer(t, pod)
	env := envOf(c)
	if env["MCP_MUX_CONFIG"] != "/etc/mcp-mux/extensions_config.json" {
		t.Errorf("MCP_MUX_CONFIG = %q", env["MCP_MUX_CONFIG"])
	}
	if env["MCP_MUX_DATA_DIR"] != "/var/lib/mcp-mux" {
		t.Errorf("MCP_MUX_DATA_DIR = %q", env["MCP_MUX_DATA_DIR"])
	}
	if env["MCP_MUX_OPS_LISTEN"] != "0.0.0.0:8932" {
		t.Errorf("MCP_MUX_OPS_LISTEN = %q", env["MCP_MUX_OPS_LISTEN"])
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("args %q do not run serve", c.Args)
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || m.SubPathExpr != "" {
			t.Errorf("mount %s uses a subPath: a ConfigMap update would never reach it", m.Name)
		}
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("mount %s has no volume", m.Name)
		}
		mounts[m.MountPath] = m
	}
	cfg, ok := mounts["/etc/mcp-mux"]
	if !ok || !cfg.ReadOnly {
		t.Errorf("config directory mount = %+v, want /etc/mcp-mux read-only", cfg)
	} else if v := volumes[cfg.Name]; v.ConfigMap == nil || v.ConfigMap.Name != configMap {
		t.Errorf("config volume %+v, want ConfigMap %s", v.VolumeSource, configMap)
	} else if len(v.ConfigMap.Items) > 0 {
		t.Errorf("config volume projects items %v: mount the whole ConfigMap", v.ConfigMap.Items)
	}
	for _, p := range []string{"/var/lib/mcp-mux", "/tmp"} {
		m, ok := mounts[p]
		if !ok || m.ReadOnly {
			t.Errorf("no writable mount at %s (the root filesystem is read-only)", p)
		} else if volumes[m.Name].EmptyDir == nil {
			t.Errorf("%s is not an emptyDir", p)
		}
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", name)
			continue
		}
		if probe.HTTPGet.Path != name {
			t.Errorf("probe path %q, want %q", probe.HTTPGet.Path, name)
		}
		if probe.HTTPGet.Port.Type != intstr.String || ports[probe.HTTPGet.Port.StrVal] != 8932 {
			t.Errorf("probe %s targets port %v, want the ops port 8932 (declared ports %v)", name, probe.HTTPGet.Port.String(), ports)
		}
		if probe.HTTPGet.Host != "" {
			t.Errorf("probe %s sets host %q", name, probe.HTTPGet.Host)
		}
	}

	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("runAsNonRoot is not true")
	case sc.RunAsUser == nil || *sc.RunAsUser == 0:
		t.Error("runAsUser is unset or root")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v lack a memory request and limit", c.Resources)
	}
	return c
}

// checkConfig loads the rendered extensions_config.json with the mux's own
// loader: the chart must produce a config that serve accepts.
func checkConfig(t *testing.T, cm *corev1.ConfigMap, env map[string]string) *config.Config {
	t.Helper()
	text, ok := cm.Data["extensions_config.json"]
	if !ok {
		t.Fatalf("ConfigMap %s has no extensions_config.json: %v", cm.Name, cm.Data)
	}
	path := filepath.Join(t.TempDir(), "extensions_config.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, config.LoadOptions{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("the rendered config does not load: %v\n%s", err, text)
	}
	return cfg
}

func TestDeploymentMode(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{
		"config": map[string]any{
			"mcpServers": map[string]any{"web": map[string]any{"type": "http", "url": "http://web.agents.svc/mcp"}},
			"inbound":    map[string]any{"auth": map[string]any{"mode": "api_keys", "keys": map[string]any{"alice": "$KEY_ALICE"}}},
		},
		"envFromSecret": "mux-secrets",
	})
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, out)
	if got, want := o.kinds(), []string{"ConfigMap", "Deployment", "Service"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	cm, dep, svc := o.configMaps[0], o.deployments[0], o.services[0]
	pod := &dep.Spec.Template.Spec
	c := checkMuxContainer(t, pod, cm.Name)
	if got := envOf(c)["MCP_MUX_LISTEN"]; got != "0.0.0.0:8931" {
		t.Errorf("deployment mode listens on %q, want 0.0.0.0:8931", got)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "mux-secrets" {
		t.Errorf("envFrom %+v, want the Secret mux-secrets", c.EnvFrom)
	}
	if cfg := checkConfig(t, cm, map[string]string{"KEY_ALICE": "k"}); cfg.Inbound.Auth.Mode != "api_keys" || len(cfg.Servers) != 1 {
		t.Errorf("rendered config: auth %q, %d servers", cfg.Inbound.Auth.Mode, len(cfg.Servers))
	}

	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", psc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted; the mux needs no API access")
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 30 {
		t.Errorf("terminationGracePeriodSeconds %v leaves no time to drain", pod.TerminationGracePeriodSeconds)
	}
	if ann := dep.Spec.Template.Annotations; ann["checksum/config"] != "" {
		t.Error("pods roll on every config change by default; the mux reloads it in place")
	}

	if !matches(svc.Spec.Selector, dep.Spec.Template.Labels) || !matches(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		t.Errorf("selectors %v / %v do not match pod labels %v", svc.Spec.Selector, dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels)
	}
	svcPorts := map[string]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = p
	}
	containerPorts := map[string]int32{}
	for _, p := range c.Ports {
		containerPorts[p.Name] = p.ContainerPort
	}
	if p := svcPorts["http"]; p.Port != 8931 || containerPorts[p.TargetPort.StrVal] != 8931 {
		t.Errorf("service port http %+v does not reach the container's 8931 (%v)", p, containerPorts)
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || svc.Spec.SessionAffinityConfig == nil ||
		*svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 1800 {
		t.Errorf("session affinity %q %+v, want ClientIP for 1800 s", svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig)
	}
}

func TestDeploymentReplicasWithRedis(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{
		"replicas": 3,
		"config": map[string]any{
			"inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}},
			"store":   map[string]any{"redis_url": "$REDIS_URL"},
		},
		"envFromSecret":  "mux-secrets",
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"securityContext": map[string]any{
			"runAsUser": 1000, "runAsGroup": 1000,
		},
		"image":              map[string]any{"tag": "0.1.0-node"},
		"rollOnConfigChange": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, out)
	if got, want := o.kinds(), []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceMonitor"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	dep, pdb, svc, sm := o.deployments[0], o.pdbs[0], o.services[0], o.serviceMonitors[0]
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("replicas %v", dep.Spec.Replicas)
	}
	c := checkMuxContainer(t, &dep.Spec.Template.Spec, o.configMaps[0].Name)
	if c.Image != "mcp-mux:0.1.0-node" || *c.SecurityContext.RunAsUser != 1000 {
		t.Errorf("image %s as uid %d, want the node image as 1000", c.Image, *c.SecurityContext.RunAsUser)
	}
	if dep.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("rollOnConfigChange set no checksum annotation")
	}
	checkConfig(t, o.configMaps[0], map[string]string{"REDIS_URL": "redis://redis:6379/0"})
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !matches(pdb.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		t.Errorf("PDB %+v", pdb.Spec)
	}
	// Sessions shared through Redis: no affinity (any replica serves any session).
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityNone || svc.Spec.SessionAffinityConfig != nil {
		t.Errorf("session affinity %q %+v with config.store.redis_url, want None", svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig)
	}
	if !matches(sm.Spec.Selector.MatchLabels, svc.Labels) || sm.Metadata.Labels["release"] != "prom" {
		t.Errorf("ServiceMonitor selector %v, labels %v; Service labels %v", sm.Spec.Selector.MatchLabels, sm.Metadata.Labels, svc.Labels)
	}
	var opsPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == "ops" {
			opsPort = &svc.Spec.Ports[i]
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "ops" || sm.Spec.Endpoints[0].Path != "/metrics" || opsPort == nil || opsPort.Port != 8932 {
		t.Errorf("ServiceMonitor endpoints %+v, Service ops port %+v", sm.Spec.Endpoints, opsPort)
	}
}

// TestRefusedValues: value sets that cannot work fail to render, with a
// message that names what to set.
func TestRefusedValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"replicas without redis", map[string]any{"replicas": 2, "config": map[string]any{"inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}}}, "config.store.redis_url"},
		// A null (or emptied) block is a missing one: the same message, never a template error.
		{"replicas with a null store", map[string]any{"replicas": 2, "config": map[string]any{"store": nil, "inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}}}, "replicas > 1 needs config.store.redis_url"},
		{"replicas with a null redis_url", map[string]any{"replicas": 2, "config": map[string]any{"store": map[string]any{"redis_url": nil}, "inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}}}, "replicas > 1 needs config.store.redis_url"},
		{"replicas with a store that is not an object", map[string]any{"replicas": 2, "config": map[string]any{"store": "redis://redis:6379", "inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}}}, "config.store must be an object"},
		{"an inbound that is not an object", map[string]any{"config": map[string]any{"inbound": "x"}}, "config.inbound must be an object"},
		{"an auth that is not an object", map[string]any{"config": map[string]any{"inbound": map[string]any{"auth": []any{"api_keys"}}}}, "config.inbound.auth must be an object"},
		{"a config that is not an object", map[string]any{"config": "{}"}, "config must be an object"},
		{"replicas with the data claim", map[string]any{"replicas": 2, "dataPersistentVolumeClaim": "c", "config": map[string]any{"store": map[string]any{"redis_url": "$REDIS_URL"}, "inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}}}, "dataPersistentVolumeClaim holds the embedded task store of one replica"},
		{"remote none", map[string]any{"config": map[string]any{"inbound": map[string]any{"auth": map[string]any{"mode": "none"}}}}, "config.inbound.auth.allow_remote: true"},
		{"unknown mode", map[string]any{"mode": "daemonset"}, `mode must be "deployment" or "sidecar"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, chartDir(), tc.values)
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "error calling") || strings.Contains(err.Error(), "interface conversion") {
				t.Errorf("error %v does not mention %q (or is a template error, not the chart's message)", err, tc.want)
			}
		})
	}
}

// TestRemoteNoneOptIn: allow_remote renders a Deployment whose config the
// mux accepts on 0.0.0.0.
func TestRemoteNoneOptIn(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{"config": map[string]any{
		"inbound": map[string]any{"auth": map[string]any{"mode": "none", "allow_remote": true}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, out)
	if len(o.deployments) != 1 || len(o.pdbs) != 0 {
		t.Fatalf("objects %v", o.kinds())
	}
	if cfg := checkConfig(t, o.configMaps[0], nil); !cfg.Inbound.Auth.AllowRemote {
		t.Error("allow_remote did not reach the config")
	}
}

func TestExistingConfigMap(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{"existingConfigMap": "my-mux-config", "podDisruptionBudget": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, out)
	if got, want := o.kinds(), []string{"Deployment", "PodDisruptionBudget", "Service"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	checkMuxContainer(t, &o.deployments[0].Spec.Template.Spec, "my-mux-config")
}

// TestSidecarAlone: in sidecar mode the chart itself renders only the config.
func TestSidecarAlone(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{"mode": "sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, out)
	if got := o.kinds(); !slices.Equal(got, []string{"ConfigMap"}) {
		t.Fatalf("objects %v, want only the ConfigMap", got)
	}
	checkConfig(t, o.configMaps[0], nil)
}

// TestSidecarInAgentChart renders testdata/agent, an agent's chart that
// depends on mcp-mux and adds it to its pod with the library templates,
// exactly as README shows.
func TestSidecarInAgentChart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	copyDir(t, filepath.Join("testdata", "agent"), dir)
	copyDir(t, chartDir(), filepath.Join(dir, "charts", "mcp-mux"))
	out, err := render(t, dir, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, out)
	if got, want := o.kinds(), []string{"ConfigMap", "Deployment"}; !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
	pod := &o.deployments[0].Spec.Template.Spec
	if len(pod.Containers) != 2 {
		t.Fatalf("containers %d, want the agent and mcp-mux", len(pod.Containers))
	}
	c := checkMuxContainer(t, pod, o.configMaps[0].Name)
	if got := envOf(c)["MCP_MUX_LISTEN"]; got != "127.0.0.1:8931" {
		t.Errorf("the sidecar listens on %q, want 127.0.0.1:8931", got)
	}
	for _, p := range c.Ports {
		if p.ContainerPort == 8931 {
			t.Errorf("the sidecar declares the MCP port %+v: it serves loopback only", p)
		}
	}
	if c.Image != "mcp-mux:0.1.0-node" || len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "agent-mcp-secrets" {
		t.Errorf("the agent's values did not reach the sidecar: image %s, envFrom %+v", c.Image, c.EnvFrom)
	}
	cfg := checkConfig(t, o.configMaps[0], map[string]string{"GITHUB_TOKEN": "t"})
	if len(cfg.Servers) != 1 || cfg.Servers[0].Command != "npx" {
		t.Errorf("servers %+v", cfg.Servers)
	}
}

// TestChartMetadata: the image tag follows the chart's appVersion.
func TestChartMetadata(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct {
			Tag string `json:"tag"`
		} `json:"image"`
	}
	for file, v := range map[string]any{"Chart.yaml": &chart, "values.yaml": &values} {
		b, err := os.ReadFile(filepath.Join(chartDir(), file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if chart.AppVersion == "" || values.Image.Tag != chart.AppVersion {
		t.Errorf("image.tag %q, appVersion %q: keep them equal", values.Image.Tag, chart.AppVersion)
	}
}

// matches reports whether every selector label is among labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDataPersistentVolumeClaim: the embedded task store's directory,
// /var/lib/mcp-mux, is an emptyDir unless dataPersistentVolumeClaim names a
// claim, which is then mounted there instead.
func TestDataPersistentVolumeClaim(t *testing.T) {
	auth := map[string]any{"inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}, "mcp_tasks": map[string]any{"enabled": true}}
	for _, claim := range []string{"", "mux-tasks"} {
		out, err := render(t, chartDir(), map[string]any{"config": auth, "dataPersistentVolumeClaim": claim})
		if err != nil {
			t.Fatal(err)
		}
		dep := decode(t, out).deployments[0]
		pod := dep.Spec.Template.Spec
		var vol *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == "mcp-mux-data" {
				vol = &pod.Volumes[i]
			}
		}
		mounted := false
		for _, m := range pod.Containers[0].VolumeMounts {
			mounted = mounted || m.Name == "mcp-mux-data" && m.MountPath == "/var/lib/mcp-mux" && !m.ReadOnly
		}
		switch {
		case vol == nil || !mounted:
			t.Errorf("claim %q: volume %+v, mounted at /var/lib/mcp-mux: %v", claim, vol, mounted)
		case claim == "" && (vol.EmptyDir == nil || vol.PersistentVolumeClaim != nil):
			t.Errorf("no claim: volume %+v, want an emptyDir", vol.VolumeSource)
		case claim != "" && (vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != claim || vol.EmptyDir != nil):
			t.Errorf("claim %q: volume %+v, want that claim", claim, vol.VolumeSource)
		}
		if want := map[string]appsv1.DeploymentStrategyType{"": appsv1.RollingUpdateDeploymentStrategyType, "mux-tasks": appsv1.RecreateDeploymentStrategyType}[claim]; dep.Spec.Strategy.Type != want {
			t.Errorf("claim %q: strategy %q, want %q (one mux holds the store file)", claim, dep.Spec.Strategy.Type, want)
		}
	}
}

// TestNullConfig: a null config renders as {}, a config serve accepts.
func TestNullConfig(t *testing.T) {
	out, err := render(t, chartDir(), map[string]any{"mode": "sidecar", "config": nil})
	if err != nil {
		t.Fatal(err)
	}
	cm := decode(t, out).configMaps[0]
	if got := strings.TrimSpace(cm.Data["extensions_config.json"]); got != "{}" {
		t.Errorf("rendered config %q, want {}", got)
	}
	checkConfig(t, cm, nil)
}

// TestSessionAffinityOverride: an explicit service.sessionAffinity wins
// over the automatic choice (ClientIP kept with Redis, None without).
func TestSessionAffinityOverride(t *testing.T) {
	for _, tc := range []struct {
		affinity string
		redis    bool
		want     corev1.ServiceAffinity
	}{
		{"ClientIP", true, corev1.ServiceAffinityClientIP},
		{"None", false, corev1.ServiceAffinityNone},
		{"", false, corev1.ServiceAffinityClientIP},
		{"", true, corev1.ServiceAffinityNone},
	} {
		cfg := map[string]any{"inbound": map[string]any{"auth": map[string]any{"mode": "trusted_header"}}}
		if tc.redis {
			cfg["store"] = map[string]any{"redis_url": "$REDIS_URL"}
		}
		out, err := render(t, chartDir(), map[string]any{"config": cfg, "service": map[string]any{"sessionAffinity": tc.affinity}})
		if err != nil {
			t.Fatal(err)
		}
		svc := decode(t, out).services[0]
		if svc.Spec.SessionAffinity != tc.want || (tc.want == corev1.ServiceAffinityClientIP) != (svc.Spec.SessionAffinityConfig != nil) {
			t.Errorf("sessionAffinity %q, redis %v: %q %+v, want %q", tc.affinity, tc.redis, svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig, tc.want)
		}
	}
}
