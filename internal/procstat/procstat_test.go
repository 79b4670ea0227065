package procstat

import (
	"fmt"
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		line string
		want Stat
		ok   bool
	}{
		{"42 (sleep) S 1 42 42 0 -1 4194304", Stat{'S', 1, 42}, true},
		{"7 (a) b) (c) Z 3 5 5", Stat{'Z', 3, 5}, true}, // ')' and spaces in comm
		{"9 (tab\tname) R 2 9\n", Stat{'R', 2, 9}, true},
		{"9 (x) R 2", Stat{}, false},     // too few fields
		{"9 (x) RS 2 9", Stat{}, false},  // state is one letter
		{"9 (x) R two 9", Stat{}, false}, // not a number
		{"9 no parens R 2 9", Stat{}, false},
		{"", Stat{}, false},
	} {
		got, err := Parse([]byte(c.line))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, ok %v", c.line, got, err, c.want, c.ok)
		}
	}
}

func TestReadSelf(t *testing.T) {
	st, err := Read(os.Getpid())
	if err != nil || st.PPID != os.Getppid() || !st.Live() {
		t.Fatalf("Read(self) = %+v, %v; want live with ppid %d", st, err, os.Getppid())
	}
	found := false
	for _, p := range PIDs() {
		found = found || p == os.Getpid()
	}
	if !found {
		t.Error("PIDs lacks this process")
	}
	if _, err := Read(-1); err == nil {
		t.Error("Read(-1) succeeded")
	}
}

// FuzzParse: any input parses or fails without panicking, and a line built
// from any comm and fields parses back to them.
func FuzzParse(f *testing.F) {
	f.Add([]byte("42 (sleep) S 1 42 42 0"), "sleep", byte('S'), 1, 42)
	f.Add([]byte("1 ((( ) Z 0 0"), ") (", byte('Z'), 0, 0)
	f.Fuzz(func(t *testing.T, raw []byte, comm string, state byte, ppid, pgrp int) {
		_, _ = Parse(raw)
		if state <= ' ' || state == ')' || state > '~' || len(comm) > 64 {
			return
		}
		line := fmt.Sprintf("123 (%s) %c %d %d 0 -1", comm, state, ppid, pgrp)
		got, err := Parse([]byte(line))
		if err != nil || got != (Stat{state, ppid, pgrp}) {
			t.Fatalf("Parse(%q) = %+v, %v", line, got, err)
		}
	})
}

func TestRSS(t *testing.T) {
	for _, c := range []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\tx\nVmPeak:\t  9 kB\nVmRSS:\t    1234 kB\nRssAnon:\t 1 kB\n", 1234 << 10, true},
		{"VmRSS: 0 kB", 0, true},
		{"Name:\tkernel thread\n", 0, false}, // no VmRSS line
		{"VmRSS:\t12 MB\n", 0, false},
		{"VmRSS:\t-1 kB\n", 0, false},
	} {
		got, err := parseRSS([]byte(c.status))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseRSS(%q) = %d, %v; want %d, ok %v", c.status, got, err, c.want, c.ok)
		}
	}
	if n, err := RSS(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("RSS(self) = %d, %v", n, err)
	}
	if _, err := RSS(-1); err == nil {
		t.Error("RSS(-1) succeeded")
	}
}
