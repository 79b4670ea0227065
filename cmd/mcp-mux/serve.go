package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/mcp-mux/mcp-mux/internal/api"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/safelog"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
)

// selfExe is this binary, which supervises each stdio server (see
// upstream.RunSupervisor); the link works even if the file was replaced.
const selfExe = "/proc/self/exe"

const (
	defaultListen = "127.0.0.1:8931"
	defaultConfig = "extensions_config.json"
	drainTimeout  = 20 * time.Second
	// maxShutdownDelay bounds --shutdown-delay.
	maxShutdownDelay = 5 * time.Minute
)

// serveFlags are serve's settings, from its flags and the environment.
type serveFlags struct {
	config, listen, dataDir, logFormat, logLevel string
	opsListen                                    string
	shutdownDelay                                time.Duration
	configGiven                                  bool
}

// parseServe reads serve's flags, then the environment for those not
// given, and checks them.
func parseServe(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) (*serveFlags, error) {
	f := &serveFlags{}
	var delay string
	fs := f.flagSet(&delay, stderr)
	if wantsHelp(args) {
		fs.SetOutput(stdout) // the flag package prints the usage for -h itself
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	delay = f.applyEnv(env, delay)
	d, err := parseShutdownDelay(delay)
	if err != nil {
		return nil, err
	}
	f.shutdownDelay = d
	if err := f.checkLog(stderr); err != nil {
		return nil, err
	}
	return f, nil
}

// flagSet returns serve's flag set, writing into f and, for
// --shutdown-delay, into delay.
func (f *serveFlags) flagSet(delay *string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "config file (env MCP_MUX_CONFIG; default ./"+defaultConfig+")")
	fs.StringVar(&f.listen, "listen", "", "listen address (env MCP_MUX_LISTEN; default "+defaultListen+")")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory for the embedded task store (env MCP_MUX_DATA_DIR; default $XDG_STATE_HOME/mcp-mux, else ~/.local/state/mcp-mux)")
	fs.StringVar(&f.opsListen, "ops-listen", "", "a second address serving only /healthz, /readyz and /metrics (env MCP_MUX_OPS_LISTEN; default none)")
	fs.StringVar(delay, "shutdown-delay", "", "on SIGTERM, answer /readyz 503 this long before closing the listener (env MCP_MUX_SHUTDOWN_DELAY; default 0s)")
	fs.StringVar(&f.logFormat, "log-format", "", "log format: json or text (default: text when stderr is a terminal, else json)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mcp-mux serve [flags]\n\nServes /mcp (MCP) for the servers in the config file, plus /healthz, /readyz, /metrics,\nthe status page (/ and /api/status), the admin config API and the task API.")
		fs.PrintDefaults()
	}
	return fs
}

// applyEnv fills the settings no flag gave from the environment, then the
// defaults, and returns the shutdown delay the same way from delay.
func (f *serveFlags) applyEnv(env func(string) (string, bool), delay string) string {
	f.config = cmp.Or(f.config, lookup(env, "MCP_MUX_CONFIG"))
	f.configGiven = f.config != ""
	f.config = cmp.Or(f.config, defaultConfig)
	f.listen = cmp.Or(f.listen, lookup(env, "MCP_MUX_LISTEN"), defaultListen)
	f.dataDir = cmp.Or(f.dataDir, lookup(env, "MCP_MUX_DATA_DIR"))
	f.opsListen = cmp.Or(f.opsListen, lookup(env, "MCP_MUX_OPS_LISTEN"))
	return cmp.Or(delay, lookup(env, "MCP_MUX_SHUTDOWN_DELAY"))
}

// lookup returns the value of the environment variable name, "" when it is
// not set.
func lookup(env func(string) (string, bool), name string) string {
	v, _ := env(name)
	return v
}

// parseShutdownDelay reads --shutdown-delay: a duration between 0 and
// maxShutdownDelay, 0 when empty.
func parseShutdownDelay(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxShutdownDelay {
		return 0, fmt.Errorf("--shutdown-delay %q is not a duration between 0s and %s", s, maxShutdownDelay)
	}
	return d, nil
}

// checkLog checks the log level and format, the format defaulting to text
// when stderr is a terminal and JSON otherwise.
func (f *serveFlags) checkLog(stderr io.Writer) error {
	if f.logFormat == "" {
		f.logFormat = "json"
		if isTerminal(stderr) {
			f.logFormat = "text"
		}
	}
	if f.logFormat != "json" && f.logFormat != "text" {
		return fmt.Errorf("--log-format must be json or text, not %q", f.logFormat)
	}
	if hclog.LevelFromString(f.logLevel) == hclog.NoLevel {
		return fmt.Errorf("--log-level %q is not a level (trace, debug, info, warn, error)", f.logLevel)
	}
	return nil
}

// serve runs mcp-mux serve until ctx ends or a listener fails, and returns
// the exit code.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	f, err := parseServe(args, stdout, stderr, env)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcp-mux serve:", err)
		return 2
	}
	log := newLogger(f, stderr)
	// Listen first: a server whose url is this listener is invalid.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		log.Error("listening", "addr", f.listen, "err", err)
		return 1
	}
	cfg, data, ok := startupConfig(f, env, ln.Addr(), log, stderr)
	if !ok {
		_ = ln.Close()
		return 1
	}
	rc, err := openRedis(cfg, log)
	if err != nil {
		_ = ln.Close()
		log.Error("opening the store", "err", err)
		return 1
	}
	if rc != nil {
		defer rc.Close() // after every store on it
	}
	store, err := openTaskStore(cfg, rc, f.dataDir, env, log.Named("tasks"))
	if err != nil {
		_ = ln.Close()
		log.Error("opening the task store", "err", err)
		return 1
	}
	if store != nil {
		defer store.Close()
	}
	sessions, stateKey := sessionStore(cfg, rc, log)
	acctStore, localKey, err := openAccountStore(cfg, rc, f.dataDir, env, log.Named("accounts"))
	if err != nil {
		_ = ln.Close()
		log.Error("opening the account store", "err", err)
		return 1
	}
	if acctStore != nil {
		defer acctStore.Close() // after the server
	}
	if localKey != "" {
		stateKey = localKey
	}
	routeOTelErrors(cfg.Telemetry, env, log.Named("telemetry"))
	ids := callerIDs(cfg, stateKey)
	auditor, err := openAudit(cfg.Telemetry.Audit, ids, log)
	if err != nil {
		_ = ln.Close()
		log.Error("opening the audit output", "err", err)
		return 1
	}
	defer closeAudit(auditor, log) // after the server: its last calls are recorded
	pins := toolpin.New(toolpin.Options{Open: pinStore(cfg, rc, f.dataDir, env, log.Named("pins")), Log: log.Named("pins")})
	defer closePins(pins, log) // after the server
	srv := proxy.New(proxy.Options{Logger: log, Version: version, StdioSupervisor: selfExe, TaskStore: store, TaskConfig: taskConfig(cfg.Tasks),
		SessionStore: sessions, StateKey: stateKey, Telemetry: telemetryOptions(cfg.Telemetry, ids, env, log), Audit: auditor, LimitStore: limitStore(cfg, rc),
		AccountStore: acctStore, ApprovalStore: approvalStore(cfg, rc, f.dataDir, env, log.Named("approvals")), SpillStore: spillStore(cfg, rc),
		Pins: pins})
	if err := srv.Apply(cfg); err != nil {
		_ = ln.Close()
		_ = srv.Close(context.Background())
		log.Error("applying config", "err", err)
		return 1
	}
	rl := startReloader(srv, log, ln.Addr(), f.config, env, data)
	defer rl.stop()
	routes := http.NewServeMux()
	api.MountTasks(routes, api.TasksOptions{Service: taskService(srv), Authenticated: srv.Authenticated})
	mountAdmin(routes, srv, pins, rl, log, env)
	api.MountStatus(routes, api.StatusOptions{
		Source:     srv,
		Tasks:      func() api.TaskCounter { return taskCounter(srv) },
		AdminToken: func() string { return srv.Config().Admin.Token.Reveal() },
	})
	routes.Handle("/", srv.Handler())
	hs := srv.HTTPServer()
	hs.Handler = srv.GuardHosts(routes) // the Host/Origin checks cover every route of the listener
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()

	ops, err := serveOps(srv, f.opsListen, errc, log)
	if err != nil {
		log.Error("listening (ops)", "addr", f.opsListen, "err", err)
		_ = hs.Close()
		_ = srv.Close(context.Background())
		return 1
	}
	log.Info("serving", "addr", ln.Addr().String(), "endpoint", "http://"+ln.Addr().String()+"/mcp", "servers", len(cfg.Servers))
	if cfg.Admin.Metrics == config.MetricsOpsListener && ops == nil {
		log.Warn(`admin.metrics is "ops_listener" but there is no --ops-listen: /metrics is served nowhere`)
	}
	sumCtx, stopSummary := context.WithCancel(ctx)
	var summary sync.WaitGroup
	summary.Go(func() { logSummary(sumCtx, log, srv) })

	code := awaitStop(ctx, errc, rl, log)
	rl.stop() // no reload while draining
	stopSummary()
	summary.Wait()
	// Readiness turns false first; with a shutdown delay the listener keeps
	// serving meanwhile, so load balancers see it before connections fail.
	srv.Drain()
	log.Info("shutting down: readiness is false", "shutdown_delay", f.shutdownDelay.String())
	if code == 0 {
		delayShutdown(f.shutdownDelay, errc, log)
	}
	shutdown(hs, ops, srv, log)
	return code
}

// newLogger returns the logger f asks for, on stderr.
func newLogger(f *serveFlags, stderr io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "mcp-mux",
		Level:      hclog.LevelFromString(f.logLevel),
		JSONFormat: f.logFormat == "json",
		// Logged text includes what upstreams send (stderr, errors, names):
		// its control characters are escaped in both formats.
		Output: safelog.Writer(stderr, f.logFormat == "json"),
	})
}

// startupConfig loads the config serve starts with (none when the default
// file does not exist), reports its warnings and checks that it may be
// served at addr. It prints or logs what is wrong and reports false when
// serve must not start.
func startupConfig(f *serveFlags, env func(string) (string, bool), addr net.Addr, log hclog.Logger, stderr io.Writer) (*config.Config, []byte, bool) {
	cfg, data, err := loadConfig(f, env, addr)
	if err != nil {
		printLoadError(stderr, f.config, err)
		return nil, nil, false
	}
	if cfg == nil {
		log.Warn("no config file; starting with no servers", "path", f.config)
		cfg = &config.Config{}
	}
	reportConfig(log, cfg)
	if err := startupError(cfg, addr); err != nil {
		log.Error("refusing to serve", "reason", err)
		return nil, nil, false
	}
	return cfg, data, true
}

// startupError returns why cfg must not be served at addr, or nil.
func startupError(cfg *config.Config, addr net.Addr) error {
	if err := checkRemote(cfg, addr); err != nil {
		return err
	}
	return proxy.TaskStartupError(cfg)
}

// serveOps starts the ops listener at addr, if any, serving health,
// readiness and metrics; its Serve error goes to errc.
func serveOps(srv *proxy.Server, addr string, errc chan<- error, log hclog.Logger) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	oln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ops := srv.HTTPServer()
	// No Host checks here: probes name the pod IP, and nothing on this
	// listener is more than health, readiness counts and metrics.
	ops.Handler = srv.OpsHandler()
	go func() { errc <- ops.Serve(oln) }()
	log.Info("serving health and metrics", "addr", oln.Addr().String())
	return ops, nil
}

// awaitStop serves reload signals until ctx ends (exit code 0) or a
// listener fails (1).
func awaitStop(ctx context.Context, errc <-chan error, rl *reloader, log hclog.Logger) int {
	for {
		select {
		case err := <-errc:
			log.Error("server stopped", "err", err)
			return 1
		case <-rl.hup:
			_ = rl.reload("signal") // the reload logs and records its outcome
		case <-ctx.Done():
			return 0
		}
	}
}

// delayShutdown keeps the listeners serving for d (the shutdown delay)
// unless one fails meanwhile.
func delayShutdown(d time.Duration, errc <-chan error, log hclog.Logger) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case err := <-errc:
		log.Error("server stopped", "err", err)
	}
}

// shutdown closes the listener, then drains in-flight calls and closes the
// sessions within drainTimeout, and closes the ops listener.
func shutdown(hs, ops *http.Server, srv *proxy.Server, log hclog.Logger) {
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	// Shutdown closes the listener, then runs the OnShutdown hooks.
	closed := make(chan struct{})
	hs.RegisterOnShutdown(func() {
		log.Info("closed the listener; draining in-flight calls", "timeout", drainTimeout.String())
		close(closed)
	})
	// SSE streams never finish on their own: close sessions while draining.
	shut := make(chan struct{})
	go func() { _ = hs.Shutdown(sctx); close(shut) }()
	<-closed
	_ = srv.Close(sctx)
	_ = hs.Close()
	<-shut
	if ops != nil {
		_ = ops.Close()
	}
	log.Info("stopped")
}

// logSummary logs, once every server finished its first discovery (or ctx
// ends), one line per configured server and a total: what is up with how
// many tools, and why the rest is not.
func logSummary(ctx context.Context, log hclog.Logger, srv *proxy.Server) {
	if srv.WaitDiscovery(ctx) != nil {
		return
	}
	st := srv.Status()
	counts := map[string]int{}
	for _, s := range st.Servers {
		counts[s.State]++
		args := []any{"server", s.Name, "state", s.State, "tools", s.Tools}
		if s.HiddenTools > 0 {
			args = append(args, "hidden_tools", s.HiddenTools)
		}
		if s.Reason != "" {
			args = append(args, "reason", s.Reason)
		}
		if s.State == proxy.StateUp {
			log.Info("startup: server", args...)
		} else {
			log.Warn("startup: server", args...)
		}
	}
	args := []any{"servers", len(st.Servers), "tools", st.Tools}
	if st.HiddenTools > 0 {
		args = append(args, "hidden_tools", st.HiddenTools)
	}
	for _, state := range []string{proxy.StateUp, proxy.StateStarting, proxy.StateRetrying, proxy.StateInvalid, proxy.StateSkipped, proxy.StateDisabled} {
		args = append(args, state, counts[state])
	}
	log.Info("startup summary", args...)
}

// checkRemote enforces that inbound.auth mode none (every caller is user
// "default") serves loopback only, unless inbound.auth.allow_remote opts in.
// addr is the bound address, so a host name is judged by what it resolved to.
func checkRemote(cfg *config.Config, addr net.Addr) error {
	a := cfg.Inbound.Auth
	if (a.Mode != config.AuthNone && a.Mode != "") || a.AllowRemote { // "": no config file
		return nil
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("inbound.auth.mode is %q (no caller authentication) but the listen address %s is not loopback: "+
		"listen on 127.0.0.1, configure inbound.auth, or set inbound.auth.allow_remote to true to serve the network unauthenticated",
		config.AuthNone, addr)
}

// loadConfig returns the config and the file content it came from; nil,
// nil, nil when the default config file does not exist.
func loadConfig(f *serveFlags, env func(string) (string, bool), listen net.Addr) (*config.Config, []byte, error) {
	data, err := config.ReadFile(f.config)
	if errors.Is(err, fs.ErrNotExist) && !f.configGiven {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := config.Parse(data, config.LoadOptions{Filename: f.config, LookupEnv: env, Listen: listen.String()})
	if err != nil {
		return nil, nil, err
	}
	return cfg, data, nil
}

// reportConfig logs the config's warnings and its invalid servers.
func reportConfig(log hclog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn("config: " + w.Error())
	}
	for _, se := range cfg.Invalid {
		msgs := make([]string, len(se.Problems))
		for i, p := range se.Problems {
			msgs[i] = p.Error()
		}
		log.Warn("skipping invalid server", "server", se.Name, "problems", strings.Join(msgs, "; "))
	}
}

// isTerminal reports whether w is a terminal, where people read logs: they
// get text there and JSON everywhere else.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
