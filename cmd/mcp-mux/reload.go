package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
)

// reloader feeds config changes to the server: the file watcher, SIGHUP
// and the admin API all end in srv.Reload.
type reloader struct {
	srv   *proxy.Server
	log   hclog.Logger
	addr  net.Addr
	watch *config.Watcher // nil when the directory cannot be watched
	path  string
	load  config.LoadOptions
	hup   chan os.Signal
}

// startReloader watches the config file (initial: the content running now)
// and listens for SIGHUP. stop undoes both.
func startReloader(srv *proxy.Server, log hclog.Logger, addr net.Addr, path string, env func(string) (string, bool), initial []byte) *reloader {
	r := &reloader{srv: srv, log: log.Named("reload"), addr: addr, path: path, load: config.LoadOptions{LookupEnv: env, Listen: addr.String()}}
	w, err := config.Watch(config.WatchOptions{
		Path: path, Load: r.load, Initial: initial, OnLoad: r.apply,
		OnWatchError: func(err error) { r.log.Warn("config watch error; the periodic re-read continues", "err", err) },
	})
	if err != nil {
		r.log.Warn("not watching the config file; reload with SIGHUP or the admin API", "err", err)
	}
	r.watch = w
	r.hup = make(chan os.Signal, 1)
	signal.Notify(r.hup, syscall.SIGHUP)
	return r
}

// apply is the watcher's OnLoad: checks serve makes at start-up, then the
// server's reload. Its error is the rejection's problems.
func (r *reloader) apply(trigger string, cfg *config.Config, err error) error {
	if err == nil && cfg != nil {
		if cerr := checkRemote(cfg, r.addr); cerr != nil {
			err = cerr
		} else if terr := proxy.TaskStartupError(cfg); terr != nil {
			err = terr
		}
	}
	if err == nil && cfg != nil {
		for _, w := range cfg.Warnings {
			r.log.Warn("config: " + w.Error())
		}
	}
	ev := r.srv.Reload(trigger, cfg, err)
	if ev.Outcome == proxy.ReloadRejected {
		return errors.New(strings.Join(ev.Problems, "; "))
	}
	return nil
}

// reload re-reads the file now (SIGHUP, the admin API).
func (r *reloader) reload(trigger string) error {
	if r.watch != nil {
		return r.watch.Reload(trigger)
	}
	data, err := config.ReadFile(r.path)
	if err != nil {
		return r.apply(trigger, nil, err)
	}
	o := r.load
	o.Filename = r.path
	cfg, err := config.Parse(data, o)
	return r.apply(trigger, cfg, err)
}

func (r *reloader) stop() {
	signal.Stop(r.hup)
	if r.watch != nil {
		_ = r.watch.Close()
	}
}

// mountAdmin adds the admin config API, guarded by the running config's
// admin.token.
func mountAdmin(routes *http.ServeMux, srv *proxy.Server, pins *toolpin.Guard, r *reloader, log hclog.Logger, env func(string) (string, bool)) {
	var extra []string
	if v, ok := env("MCP_MUX_STDIO_COMMAND_ALLOWLIST"); ok {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				extra = append(extra, c)
			}
		}
	}
	api.MountAdmin(routes, api.AdminOptions{
		Path: r.path, Load: r.load,
		Token:          func() secret.Value { return srv.Config().Admin.Token },
		Reload:         func() error { return r.reload("api") },
		ResetUpstreams: srv.ResetUpstreams,
		StdioCommands:  extra,
		Disconnect:     disconnectAccount(srv),
		Approvals:      srv.Approvals(),
		Pins:           pins,
		Logger:         log.Named("admin"),
	})
}

// disconnectAccount is the admin API's Disconnect: srv's, with a server
// that connects no accounts as the API's 404.
func disconnectAccount(srv *proxy.Server) func(ctx context.Context, user, server string) (bool, error) {
	return func(ctx context.Context, user, server string) (bool, error) {
		had, err := srv.DisconnectAccount(ctx, user, server)
		if errors.Is(err, proxy.ErrNotAccountServer) {
			return false, fmt.Errorf("%w: %w", api.ErrNoAccountServer, err)
		}
		return had, err
	}
}
