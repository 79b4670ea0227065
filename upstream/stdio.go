package upstream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// baseEnv lists the host variables a stdio server inherits; everything else
// comes from the server's configured env (as in the MCP reference SDKs, which
// pass only a safe default set).
var baseEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ",
	"NODE_OPTIONS", "NPM_CONFIG_CACHE", "npm_config_cache", "GOCACHE", "GOPATH", "GOROOT"}

const (
	stdinGrace = 2 * time.Second // time to exit after stdin closes
	termGrace  = 2 * time.Second // time to exit after SIGTERM
	// maxFrame bounds one stdout line (one JSON-RPC message).
	maxFrame = 16 << 20
)

// process is one stdio server running in its own process group.
type process struct {
	cmd         *exec.Cmd
	pgid        int
	stdin       io.WriteCloser
	lines       chan []byte // JSON lines of stdout (readLines)
	stopReading func()
	skipped     *rateLog // logs skipped stdout lines
	exited      chan struct{}
	log         hclog.Logger
	// mutedStderr, when set, is the stderr of a process restarted after the
	// server/discover probe: muted until its session is up (stdioera.go).
	mutedStderr *lineSplitter

	mu       sync.Mutex
	exitedAt time.Time
	waitErr  error
}

func startProcess(opts *Options, log hclog.Logger, stderr io.Writer) (*process, error) {
	path, err := resolveCommand(opts.Command, opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("starting %q: %w", opts.Command, err)
	}
	var cmd *exec.Cmd
	if opts.Supervisor != "" {
		cmd = supervisorCommand(opts.Supervisor, path, opts.Args)
		cmd.Env = append(cmd.Env, processEnv(opts.Env)...)
		// The supervisor turns the parent-death signal into killing the group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR1}
	} else {
		cmd = exec.Command(path, opts.Args...)
		cmd.Env = processEnv(opts.Env)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	cmd.Dir = opts.Dir
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %q: %w", opts.Command, err)
	}
	stop := make(chan struct{})
	var once sync.Once
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, stdin: stdin, lines: make(chan []byte), exited: make(chan struct{}), log: log,
		stopReading: func() { once.Do(func() { close(stop) }) }}
	p.skipped = &rateLog{log: log}
	go readLines(stdout, p.lines, stop, p.skipped)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitedAt, p.waitErr = time.Now(), err
		p.mu.Unlock()
		// Grandchildren may outlive the leader (the supervisor has killed
		// them already); the group dies with it, before stop (and so Close)
		// returns.
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		close(p.exited)
	}()
	return p, nil
}

// resolveCommand finds command as exec.Command would, so that a missing
// program is reported before the supervisor starts. A path with a slash is
// relative to dir, where the process starts.
func resolveCommand(command, dir string) (string, error) {
	if !strings.Contains(command, "/") {
		return exec.LookPath(command)
	}
	p := command
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", errors.New("not an executable file")
	}
	return command, nil
}

func processEnv(env map[string]string) []string {
	out := make([]string, 0, len(baseEnv)+len(env))
	for _, k := range baseEnv {
		if _, set := env[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// stop ends the process: stdin closed, then SIGTERM, then SIGKILL, each to
// the whole process group.
func (p *process) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		return
	case <-time.After(stdinGrace):
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(termGrace):
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	<-p.exited
}

// exitedBefore reports whether the process had already exited at t.
func (p *process) exitedBefore(t time.Time) bool {
	select {
	case <-p.exited:
	default:
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exitedAt.After(t)
}
