package main

// The Dockerfile cannot be built here (no Docker engine), so this test reads
// it, runs its build stage's `go build` line exactly as written (only the -o
// path is redirected), and checks what that produces and what the final
// stages declare.

import (
	"bufio"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// stage is one FROM and the instructions that follow it.
type stage struct {
	name, base string
	body       []instruction
}

// parseDockerfile splits a Dockerfile into its global ARG defaults and stages.
func parseDockerfile(t *testing.T, text string) (map[string]string, []*stage) {
	t.Helper()
	var insts []instruction
	sc := bufio.NewScanner(strings.NewReader(text))
	var cur strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "#") { // a comment inside a continued instruction
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		insts = append(insts, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends inside a continued instruction (line %d)", start)
	}
	globals := map[string]string{}
	var stages []*stage
	for _, in := range insts {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := &stage{base: expandArgs(f[0], globals)}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			globals[k] = v
		case len(stages) == 0:
			t.Fatalf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return globals, stages
}

var argRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expandArgs replaces ${NAME} and $NAME with their values (unknown → "").
func expandArgs(s string, vals map[string]string) string {
	return argRef.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		return vals[name]
	})
}

// shellWords splits a simple shell command line: words, single and double
// quotes, no substitutions beyond what expandArgs already did.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune("|&;<>()`", r):
			t.Fatalf("the build command uses shell syntax %q this test does not run: %s", r, s)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %s", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// dockerBuildCommand finds the build stage's RUN … go build … line and
// returns its environment assignments, its go arguments and the -o path.
func dockerBuildCommand(t *testing.T, stages []*stage, vals map[string]string) (env, args []string, out string) {
	t.Helper()
	var build *stage
	for _, st := range stages {
		if st.name == "build" {
			build = st
		}
	}
	if build == nil {
		t.Fatal("Dockerfile has no stage named build")
	}
	local := map[string]string{}
	for k, v := range vals {
		local[k] = v
	}
	for _, in := range build.body {
		if in.cmd == "ARG" {
			k, v, _ := strings.Cut(in.args, "=")
			if _, set := local[k]; !set {
				local[k] = v
			}
		}
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		words := shellWords(t, expandArgs(in.args, local))
		i := 0
		for ; i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-"); i++ {
			env = append(env, words[i])
		}
		if i+1 >= len(words) || words[i] != "go" || words[i+1] != "build" {
			t.Fatalf("Dockerfile line %d: want [VAR=value ...] go build ..., got %q", in.line, words)
		}
		args = words[i+1:]
		for j := range args {
			if args[j] == "-o" && j+1 < len(args) {
				out = args[j+1]
			}
		}
		if out == "" {
			t.Fatalf("Dockerfile line %d: go build has no -o", in.line)
		}
		return env, args, out
	}
	t.Fatal("the build stage has no RUN … go build line")
	return nil, nil, ""
}

// TestDockerfileBuild runs the Dockerfile's go build line and checks that
// the binary is static, built with -trimpath and CGO off, and stamped.
func TestDockerfileBuild(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	globals, stages := parseDockerfile(t, string(text))
	const stamp = "v9.8.7-dockerfile-test"
	vals := map[string]string{"VERSION": stamp} // as --build-arg VERSION=…
	for k, v := range globals {
		vals[k] = v
	}
	env, args, out := dockerBuildCommand(t, stages, vals)
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("build environment %q lacks CGO_ENABLED=0", env)
	}
	if !slices.Contains(args, "-trimpath") {
		t.Errorf("go %q lacks -trimpath", args)
	}

	bin := filepath.Join(t.TempDir(), "mcp-mux")
	for i := range args {
		if args[i] == out {
			args[i] = bin
		}
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = filepath.Join("..", "..") // the build context: COPY . .
	cmd.Env = append(append(os.Environ(), "GOFLAGS="), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t.Logf("running the Dockerfile's build: %s go %s", strings.Join(env, " "), strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}

	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		t.Errorf("build setting CGO_ENABLED = %q", settings["CGO_ENABLED"])
	}
	if settings["-trimpath"] != "true" {
		t.Errorf("build setting -trimpath = %q", settings["-trimpath"])
	}
	if wd, _ := filepath.Abs(filepath.Join("..", "..")); bytes.Contains(mustRead(t, bin), []byte(wd)) {
		t.Errorf("binary contains the build directory %s", wd)
	}
	vout, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	if got, want := strings.TrimSpace(string(vout)), "mcp-mux "+stamp; got != want {
		t.Errorf("version prints %q, want %q", got, want)
	}
}

// TestDockerfileStages checks what the runnable stages declare: the binary
// from the build stage, a numeric non-root user (so Kubernetes can verify
// runAsNonRoot), port 8931, the config path, the task store's volume, and a
// listen address that does not open the mux beyond loopback by default.
func TestDockerfileStages(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	_, stages := parseDockerfile(t, string(text))
	if last := stages[len(stages)-1]; last.name != "static" || !strings.HasPrefix(last.base, "gcr.io/distroless/static") {
		t.Errorf("the default (last) stage is %q FROM %q, want static on distroless/static", last.name, last.base)
	}
	seen := map[string]bool{}
	for _, st := range stages {
		if st.name != "static" && st.name != "node" {
			continue
		}
		seen[st.name] = true
		decl := map[string][]string{}
		envs := map[string]string{}
		for _, in := range st.body {
			decl[in.cmd] = append(decl[in.cmd], in.args)
			if in.cmd == "ENV" {
				for _, w := range shellWords(t, in.args) {
					k, v, _ := strings.Cut(w, "=")
					envs[k] = v
				}
			}
		}
		if !slices.Contains(decl["COPY"], "--from=build /out/mcp-mux /usr/local/bin/mcp-mux") {
			t.Errorf("stage %s does not copy the built binary: %q", st.name, decl["COPY"])
		}
		users := decl["USER"]
		if len(users) != 1 {
			t.Errorf("stage %s: want one USER, got %q", st.name, users)
		} else {
			uid, err := strconv.Atoi(strings.Split(users[0], ":")[0])
			if err != nil || uid == 0 {
				t.Errorf("stage %s: USER %q is not a numeric non-root uid", st.name, users[0])
			}
		}
		if !slices.Contains(decl["EXPOSE"], "8931") {
			t.Errorf("stage %s: EXPOSE %q, want 8931", st.name, decl["EXPOSE"])
		}
		if got := decl["ENTRYPOINT"]; len(got) != 1 || got[0] != `["/usr/local/bin/mcp-mux"]` {
			t.Errorf("stage %s: ENTRYPOINT %q", st.name, got)
		}
		if got := decl["CMD"]; len(got) != 1 || got[0] != `["serve"]` {
			t.Errorf("stage %s: CMD %q", st.name, got)
		}
		// The embedded task store: its directory, and a volume there so a
		// container's tasks outlive its writable layer.
		if envs["MCP_MUX_DATA_DIR"] != "/var/lib/mcp-mux" || !slices.Contains(decl["VOLUME"], `["/var/lib/mcp-mux"]`) {
			t.Errorf("stage %s: MCP_MUX_DATA_DIR = %q, VOLUME %q; want /var/lib/mcp-mux for both", st.name, envs["MCP_MUX_DATA_DIR"], decl["VOLUME"])
		}
		if envs["MCP_MUX_CONFIG"] != "/etc/mcp-mux/extensions_config.json" {
			t.Errorf("stage %s: MCP_MUX_CONFIG = %q", st.name, envs["MCP_MUX_CONFIG"])
		}
		listen := defaultListen
		if v, ok := envs["MCP_MUX_LISTEN"]; ok {
			listen = v
		}
		if host, _, err := net.SplitHostPort(listen); err != nil || !net.ParseIP(host).IsLoopback() {
			t.Errorf("stage %s listens on %q by default: with inbound.auth none that is refused; the image default must be loopback", st.name, listen)
		}
	}
	for _, name := range []string{"static", "node"} {
		if !seen[name] {
			t.Errorf("Dockerfile has no %s stage", name)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
