// Package procstat reads what mcp-mux needs of a process from Linux's
// /proc/PID/stat (its state, parent and process group) and, for the
// benchmarks, its resident set size from /proc/PID/status.
package procstat

import (
	"bytes"
	"errors"
	"os"
	"strconv"
)

// Stat is the part of /proc/PID/stat mcp-mux reads.
type Stat struct {
	State byte // R, S, D, Z (zombie), X (dead), …
	PPID  int
	PGRP  int
}

// Live reports whether the process is neither a zombie nor dead.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// maxStat bounds what Parse reads: a stat line is a few hundred bytes.
const maxStat = 4096

var errMalformed = errors.New("malformed /proc stat line")

// Parse decodes a stat line: "pid (comm) state ppid pgrp …". comm may hold
// any byte, parentheses and spaces included, so the fields start after the
// last ')'.
func Parse(b []byte) (Stat, error) {
	if len(b) > maxStat {
		b = b[:maxStat]
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errMalformed
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return Stat{}, errMalformed
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return Stat{}, errMalformed
	}
	return Stat{State: f[0][0], PPID: ppid, PGRP: pgrp}, nil
}

// Read returns the Stat of pid; an error when it does not exist (any more)
// or its stat cannot be parsed.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(b)
}

// PIDs lists the processes in /proc.
func PIDs() []int {
	ents, _ := os.ReadDir("/proc")
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// RSS returns the resident set size of pid in bytes: VmRSS of
// /proc/PID/status.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseRSS(b)
}

var errNoRSS = errors.New("no VmRSS line in /proc status")

// parseRSS reads the "VmRSS:   1234 kB" line of a /proc status file.
func parseRSS(b []byte) (int64, error) {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		v, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, errNoRSS
		}
		kib, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kib < 0 {
			return 0, errNoRSS
		}
		return kib << 10, nil
	}
	return 0, errNoRSS
}
