package stdioproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-mux/mcp-mux/internal/procstat"
)

// A stdio server runs under a supervisor: the mux binary re-executed with
// supervisorEnv set (Options.Supervisor names it), which starts the server
// in its own process group. The kernel's parent-death signal reaches only a
// direct child, so the supervisor is that child: when mcp-mux dies, even by
// SIGKILL, the supervisor is signalled, kills the whole group, and kills
// every orphan the server left (it is their child subreaper), then exits.
// It also cleans up when the server itself exits. Only a process that both
// left the group (setsid, setpgid) and was not orphaned before the
// supervisor exits escapes it; README documents that exception.

// supervisorEnv carries the pid of the mcp-mux process that started the
// supervisor. Only the supervisor sees it: it is removed from the server's
// environment.
const supervisorEnv = "MCP_MUX_STDIO_SUPERVISOR_PARENT"

// supervisorPoll is how often the supervisor checks that mcp-mux is alive,
// in case the parent-death signal was missed (it can fire before it is set).
const supervisorPoll = 500 * time.Millisecond

// RunSupervisor runs the stdio supervisor when this process was started as
// one (Options.Supervisor) and reports its exit code; otherwise it returns
// ok false at once. Call it first in main, and in TestMain of tests whose
// Upstreams use the test binary as their Supervisor:
//
//	if code, ok := stdioproc.RunSupervisor(); ok {
//		os.Exit(code)
//	}
func RunSupervisor() (code int, ok bool) {
	parent, set := os.LookupEnv(supervisorEnv)
	if !set {
		return 0, false
	}
	if err := supervise(parent, os.Args[1:]); err != nil {
		var ee *exitCode
		if errors.As(err, &ee) {
			return int(*ee), true
		}
		fmt.Fprintln(os.Stderr, "mcp-mux stdio supervisor:", err)
		return 127, true
	}
	return 0, true
}

// exitCode is the server's exit status, which the supervisor exits with.
type exitCode int

// Error says the status.
func (e *exitCode) Error() string { return "exit status " + strconv.Itoa(int(*e)) }

// supervisorCommand returns the command that starts the server command
// (with args) under the supervisor executable exe, started by this process.
func supervisorCommand(exe, command string, args []string) *exec.Cmd {
	cmd := exec.Command(exe, append([]string{command}, args...)...)
	cmd.Env = []string{supervisorEnv + "=" + strconv.Itoa(os.Getpid())}
	return cmd
}

// supervise runs the server argv under the supervisor until it exits (its
// exit status is the error, an *exitCode) or mcp-mux, whose pid is
// parentText, is gone.
func supervise(parentText string, argv []string) error {
	parent, err := strconv.Atoi(parentText)
	if err != nil || len(argv) == 0 {
		return errors.New("started without a parent pid or a command")
	}
	// Signals that would end a plain process end the server instead: the
	// supervisor outlives it to clean up. SIGTERM from mcp-mux goes to the
	// whole group, so the server has it already.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	if err := tieToParent(parent); err != nil {
		return err
	}
	cmd, err := startServer(argv)
	if err != nil {
		return err
	}
	exited := make(chan syscall.WaitStatus, 1)
	go reapChildren(cmd.Process.Pid, exited)
	return watchServer(parent, exited, sigs)
}

// tieToParent makes the supervisor die with mcp-mux (parent) and the reaper of
// every orphan the server leaves.
func tieToParent(parent int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGUSR1), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return errors.New("mcp-mux exited before the server started")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming a child subreaper: %w", err)
	}
	return nil
}

// startServer starts the server on the supervisor's stdio and environment
// (without supervisorEnv), and hands it the pipes.
func startServer(argv []string) (*exec.Cmd, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, supervisorEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// The server shares the supervisor's group (mcp-mux signals it as a
	// whole) and dies with the supervisor should that be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %q: %w", argv[0], err)
	}
	// The server holds the pipes now; mcp-mux sees EOF when it exits.
	_ = os.Stdin.Close()
	_ = os.Stdout.Close()
	return cmd, nil
}

// watchServer waits for the server to exit (its status, from exited) or for
// mcp-mux (parent) to be gone, checked on every signal and poll; either way
// it kills every descendant first.
func watchServer(parent int, exited <-chan syscall.WaitStatus, sigs <-chan os.Signal) error {
	tick := time.NewTicker(supervisorPoll)
	defer tick.Stop()
	for {
		select {
		case ws := <-exited:
			killDescendants()
			return exitError(ws)
		case <-sigs:
		case <-tick.C:
		}
		if os.Getppid() != parent { // mcp-mux is gone
			killDescendants()
			return errors.New("mcp-mux exited; the server's processes were killed")
		}
	}
}

// exitError is the server's exit status as supervise reports it: nil for 0,
// else an *exitCode (128+n for a server killed by signal n).
func exitError(ws syscall.WaitStatus) error {
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code == 0 {
		return nil
	}
	c := exitCode(code)
	return &c
}

// reapChildren waits for every child (orphans included: the supervisor is
// their subreaper) and reports the server's exit status.
func reapChildren(server int, exited chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			// ECHILD: none right now; an orphan may still be reparented here.
			time.Sleep(5 * time.Millisecond)
		case pid == server:
			exited <- ws
		}
	}
}

// killDescendants kills every process in the supervisor's group and every
// process the supervisor adopted, until it has no child left, dead or alive:
// a dying multi-threaded process hands its children over (to the
// supervisor, their subreaper) only when its last thread has exited, which
// can be after it already shows as a zombie.
func killDescendants() {
	self := os.Getpid()
	for range 400 {
		if killPass(self) == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond) // let the kills land and reapChildren reap
	}
}

// killPass kills the live processes of self's group and self's live
// children once, and returns how many it killed plus the zombie children
// not reaped yet.
func killPass(self int) (pending int) {
	for _, pid := range procstat.PIDs() {
		if pid == self {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil {
			continue // gone
		}
		if st.Live() && (st.PGRP == self || st.PPID == self) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			pending++
		} else if st.PPID == self {
			pending++ // a zombie child, not reaped yet
		}
	}
	return pending
}
