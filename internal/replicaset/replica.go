package replicaset

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// Replica is one replica's slot: a fixed address on which its `mcp-mux
// serve` process is started, stopped and started again.
type Replica struct {
	index   int
	addr    string
	opsAddr string // --ops-listen: /healthz, /readyz, /metrics

	mu   sync.Mutex
	runs []*proc // every process started in this slot, the last one current
}

// proc is one mcp-mux process.
type proc struct {
	cmd  *exec.Cmd
	logs *mcptest.LogWaiter
	done chan struct{}
	code int // exit code (negative: killed by that signal); set before done closes
}

// URL returns the replica's own /mcp URL (not through the balancer).
func (r *Replica) URL() string { return "http://" + r.addr + "/mcp" }

// ReadyzURL returns the replica's /readyz on its ops listener, as the
// balancer checks it.
func (r *Replica) ReadyzURL() string { return "http://" + r.opsAddr + "/readyz" }

// Addr returns the replica's host:port.
func (r *Replica) Addr() string { return r.addr }

// Running reports whether the replica's process is running.
func (r *Replica) Running() bool {
	p := r.current()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Logs returns the stderr of every process run in this slot, oldest first,
// each run headed by a separator line.
func (r *Replica) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for i, p := range r.runs {
		fmt.Fprintf(&b, "----- replica %d, run %d -----\n%s", r.index, i+1, p.logs.String())
	}
	return b.String()
}

func (r *Replica) current() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.runs) == 0 {
		return nil
	}
	return r.runs[len(r.runs)-1]
}

// start runs bin with args and env and waits until it has served its
// first discovery (the "startup summary" log line).
func (r *Replica) start(bin string, args, env []string, timeout time.Duration) error {
	if r.Running() {
		return fmt.Errorf("replica %d is running already", r.index)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	// Its own process group; a test binary killed by its timeout takes it with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{cmd: cmd, logs: mcptest.NewLogWaiter(), done: make(chan struct{})}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting replica %d: %w", r.index, err)
	}
	r.mu.Lock()
	r.runs = append(r.runs, p)
	r.mu.Unlock()
	go p.wait()
	ok := p.logs.WaitFor(timeout, p.done, func(s string) bool {
		return len(mcptest.FindLogs(s, "serving")) > 0 && len(mcptest.FindLogs(s, "startup summary")) > 0
	})
	if !ok {
		select {
		case <-p.done:
			return fmt.Errorf("replica %d exited with code %d before serving", r.index, p.code)
		default:
			return fmt.Errorf("replica %d did not finish starting within %s", r.index, timeout)
		}
	}
	return nil
}

// wait records the process's exit.
func (p *proc) wait() {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		p.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = -int(ws.Signal())
		}
	case err != nil:
		p.code = -1
	}
	close(p.done)
}

// signal sends sig to the running process and waits up to timeout for it
// to exit; it returns the exit code.
func (r *Replica) signal(sig syscall.Signal, timeout time.Duration) (int, error) {
	p := r.current()
	if p == nil || !r.Running() {
		return 0, fmt.Errorf("replica %d is not running", r.index)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return 0, fmt.Errorf("signalling replica %d: %w", r.index, err)
	}
	select {
	case <-p.done:
		return p.code, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("replica %d did not exit within %s of %s", r.index, timeout, sig)
	}
}
