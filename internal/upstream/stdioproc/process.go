// Package stdioproc runs one process of a stdio MCP server: started in its
// own process group (under a supervisor that outlives mcp-mux's death),
// its stdout framed into JSON-RPC messages for the SDK (Transport), its
// stderr kept in a bounded, rate-limited, scrubbed log (StderrLog), and
// stopped as a whole group.
package stdioproc

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
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// baseEnv lists the host variables a stdio server inherits; everything else
// comes from the server's configured env (as in the MCP reference SDKs, which
// pass only a safe default set).
var baseEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ",
	"NODE_OPTIONS", "NPM_CONFIG_CACHE", "npm_config_cache", "GOCACHE", "GOPATH", "GOROOT"}

const (
	stdinGrace = 2 * time.Second // time to exit after stdin closes
	termGrace  = 2 * time.Second // time to exit after SIGTERM
)

// MaxFrame bounds one message of a server: a stdout line of a stdio server
// (one JSON-RPC message), and over HTTP a JSON response or one event.
const MaxFrame = 16 << 20

// Options say how to start a server's process.
type Options struct {
	Command string            // the program: looked up in PATH, or a path relative to Dir
	Args    []string          // its arguments
	Env     map[string]string // added to a small inherited base set
	Dir     string            // working directory
	// Supervisor is the executable that runs RunSupervisor (normally the
	// mux binary itself); empty starts the server directly.
	Supervisor string
	// Logger receives the warnings about skipped stdout lines.
	Logger hclog.Logger
}

// Process is one stdio server running in its own process group.
type Process struct {
	cmd         *exec.Cmd
	pgid        int
	stdin       io.WriteCloser
	lines       chan []byte // JSON lines of stdout (readLines)
	stopReading func()
	skipped     *rateLog // logs skipped stdout lines
	exited      chan struct{}
	// stderr is where the process's stderr goes: muted, for a process
	// restarted after a probe, until UnmuteStderr.
	stderr *StderrWriter

	mu       sync.Mutex
	exitedAt time.Time
}

// Start starts the server's process, its stderr going to stderr (nil
// discards it).
func Start(opts *Options, stderr *StderrWriter) (*Process, error) {
	cmd, err := command(opts)
	if err != nil {
		return nil, err
	}
	stdin, stdout, err := pipes(cmd)
	if err != nil {
		return nil, err
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %q: %w", opts.Command, err)
	}
	stop := make(chan struct{})
	var once sync.Once
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, stdin: stdin, lines: make(chan []byte), exited: make(chan struct{}),
		stopReading: func() { once.Do(func() { close(stop) }) }, stderr: stderr}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p.skipped = &rateLog{log: log}
	go readLines(stdout, p.lines, stop, p.skipped)
	go p.wait()
	return p, nil
}

// command builds the server's command: under the supervisor when there is
// one, in a process group of its own either way.
func command(opts *Options) (*exec.Cmd, error) {
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
	return cmd, nil
}

// pipes connects the command's stdin and stdout.
func pipes(cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	return stdin, stdout, nil
}

// wait records the process's exit and then kills what is left of its group.
func (p *Process) wait() {
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.exitedAt = time.Now()
	p.mu.Unlock()
	// Grandchildren may outlive the leader (the supervisor has killed
	// them already); the group dies with it, before Stop (and so Close)
	// returns.
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	close(p.exited)
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

// processEnv is the server's environment: the inherited base set, then
// env in key order.
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

// Stop ends the process: stdin closed, then SIGTERM, then SIGKILL, each to
// the whole process group. Its stdout lines are no longer delivered: a line
// nobody will read no longer holds the stdout reader forever.
func (p *Process) Stop() {
	p.stopReading()
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

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitedBefore reports whether the process had already exited at t.
func (p *Process) ExitedBefore(t time.Time) bool {
	select {
	case <-p.exited:
	default:
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exitedAt.After(t)
}

// Stdin is the process's stdin, for what is written before the session
// starts (a probe).
func (p *Process) Stdin() io.Writer { return p.stdin }

// StdinUnread reports how many bytes written to the process's stdin no
// process has read yet; ok is false when that cannot be told (stdin is
// closed, or not a pipe). A pipe keeps its bytes after its readers are
// gone, so a process that exited with them unread never saw them.
func (p *Process) StdinUnread() (n int, ok bool) {
	sc, isConn := p.stdin.(syscall.Conn)
	if !isConn {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}

// Lines delivers the JSON lines of the process's stdout, for what is read
// before the session starts; it is closed when stdout ends.
func (p *Process) Lines() <-chan []byte { return p.lines }

// UnmuteStderr logs the process's stderr from now on (see
// StderrLog.Writer).
func (p *Process) UnmuteStderr() {
	if p.stderr != nil {
		p.stderr.muted.Store(false)
	}
}

// Transport is the SDK transport of the process's session: newline-delimited
// JSON-RPC on its stdin and stdout.
func (p *Process) Transport() mcp.Transport { return &lineTransport{p: p} }
