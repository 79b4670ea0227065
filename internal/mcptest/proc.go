package mcptest

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/mcp-mux/mcp-mux/internal/procstat"
)

// LogBuffer collects log output from concurrent writers for assertions.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// ProcStat returns the parent and process group of a live (not zombie) pid.
func ProcStat(pid int) (ppid, pgrp int, ok bool) {
	st, err := procstat.Read(pid)
	if err != nil || !st.Live() {
		return 0, 0, false
	}
	return st.PPID, st.PGRP, true
}

// GroupMembers lists the live processes in any of the process groups.
func GroupMembers(groups ...int) []int {
	var out []int
	for _, p := range procstat.PIDs() {
		if _, pg, ok := ProcStat(p); ok {
			for _, g := range groups {
				if pg == g {
					out = append(out, p)
					break
				}
			}
		}
	}
	return out
}

// ChildGroups lists the process groups led by children of parent.
func ChildGroups(parent int) []int {
	var out []int
	for _, p := range procstat.PIDs() {
		if pp, pg, ok := ProcStat(p); ok && pp == parent && pg == p {
			out = append(out, p)
		}
	}
	return out
}

// Exists reports whether pid is a process (zombies included).
func Exists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// supervisorMark starts the environment entry of upstream's stdio
// supervisor, which carries the server's environment too.
const supervisorMark = "MCP_MUX_STDIO_SUPERVISOR_PARENT="

// StdioServers lists the live processes serving as the stdio test server
// named name (started by StdioServer, at any depth below the caller; not
// their supervisors).
func StdioServers(name string) []int {
	want := []byte(envStdio + "=" + name)
	var out []int
	for _, p := range procstat.PIDs() {
		if _, _, ok := ProcStat(p); !ok {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err != nil {
			continue
		}
		server := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, []byte(supervisorMark)) {
				server = false
				break
			}
			server = server || bytes.Equal(kv, want)
		}
		if server {
			out = append(out, p)
		}
	}
	return out
}
