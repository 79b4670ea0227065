package replicaset_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
)

// tsFlows are the checks replicas.mjs flows reports, in order.
var tsFlows = []string{"progress", "logging", "sampling", "elicitation", "roots", "subscription", "list_changed", "tool_search", "tasks"}

// tsLine is one line replicas.mjs prints: a check's result or a need.
type tsLine struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Need   string `json:"need"`
	Arg    string `json:"arg"`
}

// tsScript is a running replicas.mjs.
type tsScript struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	stderr *safeBuffer
}

// startTS runs replicas.mjs in mode against url; it is killed when ctx ends.
func startTS(ctx context.Context, t *testing.T, mode, url string) *tsScript {
	t.Helper()
	script := nodeclients.Script(t, "replicas.mjs")
	cmd := exec.CommandContext(ctx, nodeclients.Node(t), script, mode, url)
	cmd.Dir = filepath.Dir(script)
	s := &tsScript{cmd: cmd, stderr: &safeBuffer{}}
	cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdout = bufio.NewScanner(out)
	s.stdout.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// next returns the script's next JSON line, or false at the end of its output.
func (s *tsScript) next(t *testing.T) (tsLine, bool) {
	for s.stdout.Scan() {
		var l tsLine
		if json.Unmarshal(s.stdout.Bytes(), &l) == nil {
			return l, true
		}
		t.Logf("replicas.mjs: %s", s.stdout.Text())
	}
	return tsLine{}, false
}

// reply answers a need (or says stop) on the script's stdin.
func (s *tsScript) reply(line string) { _, _ = io.WriteString(s.stdin, line+"\n") }

// wait waits for the script to exit, reporting a failure with its stderr.
func (s *tsScript) wait(t *testing.T) {
	_ = s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("replicas.mjs: %v\nstderr:\n%s", err, s.stderr.String())
	}
}

// runTSFlows runs replicas.mjs flows through the balancer, doing what it
// needs, and asserts each flow as a subtest.
func runTSFlows(t *testing.T, fx *fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startTS(ctx, t, "flows", fx.set.URL())
	got := map[string]tsLine{}
	for {
		l, ok := s.next(t)
		if !ok {
			break
		}
		if l.Need != "" {
			s.reply(doNeed(fx, l.Need, l.Arg))
			continue
		}
		got[l.Check] = l
	}
	s.wait(t)
	for _, name := range append([]string{"connect"}, append(tsFlows, "done")...) {
		t.Run(name, func(t *testing.T) {
			r, ok := got[name]
			switch {
			case !ok:
				t.Errorf("no result")
			case !r.OK:
				t.Errorf("failed: %s", r.Detail)
			default:
				t.Logf("%s", r.Detail)
			}
		})
	}
}

// doNeed does what replicas.mjs asked for and returns its answer.
func doNeed(fx *fixture, need, arg string) string {
	var err error
	switch need + " " + arg {
	case "config base":
		err = fx.set.WriteConfig(fx.config(cfgOpts{}))
	case "config extra":
		err = fx.set.WriteConfig(fx.config(cfgOpts{extra: true}))
	case "config tool_search":
		err = fx.set.WriteConfig(fx.config(cfgOpts{toolSearch: true}))
	default:
		if need != "release" {
			return fmt.Sprintf("unknown need %q %q", need, arg)
		}
		fx.jobs.Release(arg)
	}
	if err != nil {
		return strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "ok"
}

// safeBuffer is a concurrency-safe bytes buffer for a child's stderr.
type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
