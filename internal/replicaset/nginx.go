package replicaset

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// NginxBin is where Debian's nginx package installs the binary.
const NginxBin = "/usr/sbin/nginx"

// nginxTemplate is the nginx example of docs/replicas-and-kubernetes.md
// ("Load balancers"), placeholders and all; TestDocsLoadBalancers holds
// the two equal.
//
//go:embed nginx.conf.tmpl
var nginxTemplate string

// nginxParams fill nginxTemplate's placeholders.
type nginxParams struct {
	Listen  string // the server's listen address
	Servers []lbServer
}

// renderNginx renders nginxTemplate with p.
func renderNginx(p nginxParams) (string, error) {
	return render("nginx.conf.tmpl", nginxTemplate, p)
}

// nginxMain is the main config the test's nginx runs: the docs'
// example included in an http block whose files all lie in the test's
// directory (%[1]s), one process that dies with the test.
const nginxMain = `daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/mcp-mux.conf;
}
`

// nginxProxy is nginx in front of the replicas. Open-source nginx has no
// active health checks: a replica leaves rotation when it refuses a
// connection, and that request goes to another.
type nginxProxy struct {
	addr   string
	cmd    *exec.Cmd
	stderr *mcptest.LogWaiter
	done   chan struct{}
}

// startNginx writes the config into dir and runs nginx in the foreground
// until stop, once it accepts connections.
func startNginx(dir string, servers []lbServer) (*nginxProxy, error) {
	ports, err := freeAddrs(1)
	if err != nil {
		return nil, err
	}
	site, err := renderNginx(nginxParams{Listen: ports[0], Servers: servers})
	if err != nil {
		return nil, err
	}
	ndir := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(ndir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(ndir, "mcp-mux.conf"), []byte(site), 0o600); err != nil {
		return nil, err
	}
	cfg := filepath.Join(ndir, "nginx.conf")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(nginxMain, ndir)), 0o600); err != nil {
		return nil, err
	}
	n := &nginxProxy{addr: ports[0], stderr: mcptest.NewLogWaiter(), done: make(chan struct{})}
	n.cmd = exec.Command(NginxBin, "-p", ndir, "-e", "stderr", "-c", cfg)
	n.cmd.Stdout, n.cmd.Stderr = n.stderr, n.stderr
	// A test binary killed by its timeout takes nginx with it.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (Debian package nginx): %w", NginxBin, err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	if err := waitListening(n.addr, n.done, 10*time.Second); err != nil {
		n.stop()
		return nil, fmt.Errorf("nginx: %w; its output:\n%s", err, n.stderr.String())
	}
	return n, nil
}

func (n *nginxProxy) url() string    { return "http://" + n.addr }
func (n *nginxProxy) output() string { return n.stderr.String() }

func (n *nginxProxy) stats() (map[string]serverStat, error) {
	return nil, errors.New("nginx has no stats page")
}

// waitStatus returns at once: nginx does not check replicas.
func (n *nginxProxy) waitStatus(context.Context, string, string) error { return nil }

// stop kills nginx and waits for it to exit.
func (n *nginxProxy) stop() {
	_ = n.cmd.Process.Kill()
	<-n.done
}
