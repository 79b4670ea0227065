package replicaset

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/doctest"
)

// readmeServers are the replicas of the docs' load balancer examples
// (docs/replicas-and-kubernetes.md).
var readmeServers = []lbServer{
	{Name: "mux1", Addr: "10.0.0.11:8931", OpsPort: "8932"},
	{Name: "mux2", Addr: "10.0.0.12:8931", OpsPort: "8932"},
	{Name: "mux3", Addr: "10.0.0.13:8931", OpsPort: "8932"},
}

// readmeHAProxy and readmeNginx render the templates with the docs'
// values.
func readmeHAProxy() (string, error) {
	return renderHAProxy(haproxyParams{Bind: ":8931", Stats: "127.0.0.1:8404", Inter: "500ms", Fall: 2, Rise: 2, Servers: readmeServers})
}

func readmeNginx() (string, error) {
	return renderNginx(nginxParams{Listen: "8931", Servers: readmeServers})
}

// TestDocsLoadBalancers: the HAProxy and nginx examples of
// docs/replicas-and-kubernetes.md are haproxy.cfg.tmpl and nginx.conf.tmpl,
// which the replica set runs, with the page's addresses and check timing in
// place of the placeholders; and both are valid configs for the installed
// haproxy and nginx.
func TestDocsLoadBalancers(t *testing.T) {
	page, err := doctest.Load("docs/replicas-and-kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lang, tmpl, bin string
		render          func() (string, error)
		check           func(t *testing.T, cfg string)
	}{
		{"haproxy", "haproxy.cfg.tmpl", HAProxyBin, readmeHAProxy, checkHAProxy},
		{"nginx", "nginx.conf.tmpl", NginxBin, readmeNginx, checkNginx},
	} {
		t.Run(c.lang, func(t *testing.T) {
			want, err := c.render()
			if err != nil {
				t.Fatal(err)
			}
			got, err := fencedBlock(page, c.lang)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("the docs' %s example is not %s with the docs' values; it should read:\n%s", c.lang, c.tmpl, want)
			}
			if _, err := os.Stat(c.bin); err != nil {
				t.Skipf("%s is not installed (Debian package %s), so the example is not checked by it: %v", c.bin, c.lang, err)
			}
			c.check(t, want)
		})
	}
}

// fencedBlock returns the body of the page's one code block fenced as
// ```lang.
func fencedBlock(page doctest.Page, lang string) (string, error) {
	var bodies []string
	for _, b := range page.Blocks() {
		if b.Lang == lang {
			bodies = append(bodies, b.Body)
		}
	}
	if len(bodies) != 1 {
		return "", fmt.Errorf("%s has %d ```%s blocks, want 1", page.Path, len(bodies), lang)
	}
	return bodies[0], nil
}

// checkHAProxy runs haproxy -c on cfg.
func checkHAProxy(t *testing.T, cfg string) {
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(HAProxyBin, "-c", "-f", path).CombinedOutput(); err != nil {
		t.Errorf("haproxy -c: %v\n%s", err, out)
	}
}

// checkNginx runs nginx -t on cfg included in an http block, as the
// replica set runs it.
func checkNginx(t *testing.T, cfg string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mcp-mux.conf"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(main, []byte(fmt.Sprintf(nginxMain, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(NginxBin, "-t", "-p", dir, "-e", "stderr", "-c", main).CombinedOutput(); err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}
