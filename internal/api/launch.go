package api

// DeerFlow's stdio launch policy for servers written through the admin API
// (research deerflow.md §7.3), defense in depth: the API can be reached over
// the network, the file cannot, so only what an API write adds or changes is
// screened. The file itself may express anything.
//
// For a package launcher (npx, bunx, uvx, pipx run, pnpm dlx, yarn dlx,
// deno run) the policy works out what the launcher would run — the first
// argument after its own options — and refuses shells, interpreters,
// package managers, command runners and local paths there, and a bare name
// that is a program on the mux's PATH outside node_modules (npx and bunx
// run those instead of a package). Launcher options must be ones the policy
// knows; those that run shell text, load code or redirect what is fetched
// are refused. For any other allowed command every argument is screened for
// code-running flags. A working directory (cwd) is refused: it decides
// which local programs and settings a launcher loads.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// defaultStdioCommands are always allowed; AdminOptions.StdioCommands adds more.
var defaultStdioCommands = []string{"npx", "uvx"}

// execFlags run code given on the command line.
var execFlags = map[string]bool{
	"-c": true, "--call": true, "-e": true, "--eval": true, "--print": true,
	"--shell": true, "--node-arg": true, "--node-options": true,
}

// launcher describes a package runner's command line.
type launcher struct {
	// sub is the subcommand that must come first ("dlx", "run"); "" for none.
	sub string
	// boolean options take no value; valued ones take the next argument
	// unless written --opt=value. Any other option is refused.
	boolean, valued map[string]bool
	// prefixes are boolean option families (deno's --allow-*).
	prefixes []string
	// refused options run code or redirect what is fetched, with why.
	refused map[string]string
	// packages are valued options whose value is a package, screened as one.
	packages map[string]bool
	// interpreter are valued options naming an interpreter: a version, never a path.
	interpreter map[string]bool
	// pathLookup: a bare name that is a program on PATH runs that program.
	pathLookup bool
}

const (
	whyShell    = "runs shell text"
	whyCode     = "loads code into the launcher"
	whyRedirect = "redirects where packages are fetched from or which settings are read"
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func reasons(why string, keys ...string) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = why
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// npmRefused are npm/npx options (and npm config keys given as options)
// that run shell text, load code or redirect the fetch.
var npmRefused = merge(
	reasons(whyShell, "-c", "--call", "--shell", "--script-shell", "--shell-mode"),
	reasons(whyCode, "--node-options", "--node-arg", "-n", "--npm", "--node-gyp", "--git", "--onload-script", "--init-module"),
	reasons(whyRedirect, "--registry", "--userconfig", "--globalconfig", "--prefix", "--globalconfig", "--cafile", "--proxy", "--https-proxy"),
)

// uvRefused are uvx/pipx options that redirect the fetch or run a program.
var uvRefused = merge(
	reasons(whyRedirect, "--index", "--index-url", "-i", "--extra-index-url", "--default-index", "--find-links", "-f",
		"--config-file", "--directory", "--project", "--with-requirements", "--with-editable", "--pip-args", "--keyring-provider"),
)

// launchers maps a command to its launcher; pnpm and yarn only as "dlx".
var launchers = map[string]*launcher{
	"npx": {
		boolean: set("-y", "--yes", "--no", "--no-install", "--ignore-existing", "-q", "--quiet", "--silent", "--prefer-offline",
			"--prefer-online", "--offline", "--no-audit", "--no-fund", "--no-update-notifier", "-d", "--ignore-scripts"),
		valued:     set("-p", "--package", "--loglevel", "--cache"),
		refused:    npmRefused,
		packages:   set("-p", "--package"),
		pathLookup: true,
	},
	"bunx": {
		boolean:    set("--bun", "-b", "--silent", "--verbose", "--no-install"),
		valued:     set("-p", "--package"),
		refused:    npmRefused,
		packages:   set("-p", "--package"),
		pathLookup: true,
	},
	"pnpm": {
		sub: "dlx", boolean: set("-s", "--silent", "--reporter=silent"), valued: set("--package"),
		refused: npmRefused, packages: set("--package"),
	},
	"yarn": {
		sub: "dlx", boolean: set("-q", "--quiet"), valued: set("-p", "--package"),
		refused: npmRefused, packages: set("-p", "--package"),
	},
	"uvx": {
		boolean: set("--isolated", "--no-cache", "-n", "--offline", "--upgrade", "-U", "--reinstall", "--refresh", "-q", "--quiet",
			"-v", "--verbose", "--no-progress", "--native-tls", "--no-config", "--no-python-downloads", "--managed-python",
			"--no-managed-python", "--no-build", "--no-binary", "--no-sources", "--compile-bytecode", "--no-build-isolation"),
		valued: set("--from", "--with", "-p", "--python", "-c", "--constraints", "--overrides", "--build-constraints", "-P",
			"--upgrade-package", "--reinstall-package", "--refresh-package", "--cache-dir", "--index-strategy", "--resolution",
			"--prerelease", "--exclude-newer", "--link-mode", "--color", "--python-platform"),
		refused:     uvRefused,
		packages:    set("--from", "--with"),
		interpreter: set("-p", "--python"),
	},
	"pipx": {
		sub:         "run",
		boolean:     set("--no-cache", "-v", "--verbose", "-q", "--quiet", "--system-site-packages", "--fetch-missing-python"),
		valued:      set("--spec", "--python"),
		refused:     uvRefused,
		packages:    set("--spec"),
		interpreter: set("--python"),
	},
	"deno": {
		sub: "run", boolean: set("-A", "--allow-all", "-q", "--quiet", "--no-prompt", "--no-remote", "--cached-only"),
		prefixes: []string{"--allow-", "--deny-"},
		refused: merge(reasons(whyCode, "--v8-flags", "--preload", "--require", "--import-map", "--env-file", "--env", "--inspect",
			"--inspect-brk", "--inspect-wait"), reasons(whyRedirect, "-c", "--config", "--lock", "--cert")),
	},
}

// deniedPrograms run arbitrary code, scripts or other programs given on
// their command line: never what a launcher may run for an API write.
var deniedPrograms = set(
	// shells and program runners
	"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox", "toybox", "env", "sudo", "su", "doas",
	"nohup", "nice", "timeout", "xargs", "exec", "eval", "command", "script", "stdbuf", "setsid", "chroot", "flock", "watch",
	"strace", "ltrace", "gdb", "find", "awk", "gawk", "mawk", "sed", "make", "git", "ssh", "curl", "wget", "tar", "pwsh",
	"powershell", "cmd", "osascript", "expect",
	// interpreters
	"node", "nodejs", "deno", "bun", "python", "pypy", "perl", "ruby", "irb", "php", "lua", "luajit", "tclsh", "wish", "java",
	"jshell", "R", "Rscript", "julia",
	// package managers and launchers (which run scripts)
	"npm", "npx", "pnpm", "pnpx", "yarn", "yarnpkg", "bunx", "uv", "uvx", "pip", "pipx", "poetry", "pdm", "hatch", "tox",
	"nox", "conda", "mamba", "corepack",
	// runners of other code
	"tsx", "ts-node", "ts-node-esm", "esno", "esrun", "vite-node", "jiti", "babel-node", "coffee", "zx", "cross-env",
	"env-cmd", "dotenv", "dotenv-cli", "concurrently", "npm-run-all", "run-s", "run-p", "nodemon", "pm2", "forever", "shx",
	"execa", "ipython", "bpython", "xonsh", "invoke",
)

// versioned matches interpreter names with a version ("python3.12", "node20").
var versioned = regexp.MustCompile(`^(python|pypy|node|perl|ruby|php|lua|pip|java)[0-9.]*$`)

// launchPolicy screens stdio servers written through the API.
type launchPolicy struct {
	// allowed are the commands a server may name.
	allowed []string
	// lookPath finds a program on the mux's PATH (exec.LookPath).
	lookPath func(string) (string, error)
}

func newLaunchPolicy(extra []string) *launchPolicy {
	allowed := append(slices.Clone(defaultStdioCommands), extra...)
	slices.Sort(allowed)
	return &launchPolicy{allowed: slices.Compact(allowed), lookPath: exec.LookPath}
}

// check applies the policy to one server; non-stdio servers pass.
func (p *launchPolicy) check(s *config.Server) error {
	if s.Type != config.TypeStdio {
		return nil
	}
	if err := p.checkCommand(s.Name, s.Command); err != nil {
		return err
	}
	if err := p.checkArgs(s.Name, s.Command, s.Args); err != nil {
		return err
	}
	if err := checkEnv(s.Name, s.Env); err != nil {
		return err
	}
	return checkCwd(s.Name, s.Cwd)
}

// checkCwd refuses a working directory: the directory decides which local
// programs (node_modules/.bin), settings (.npmrc, uv.toml, pyproject.toml)
// and files a launcher loads, so only the file may set one.
func checkCwd(name, cwd string) error {
	if cwd == "" {
		return nil
	}
	return fmt.Errorf("MCP server '%s' sets a working directory (cwd), which decides what local programs and settings its launcher loads; set it in the config file instead.", name)
}

// checkCommand requires a bare executable name that the policy allows: no
// path, no parameters, no shell syntax.
func (p *launchPolicy) checkCommand(name, cmd string) error {
	switch {
	case cmd == "":
		return fmt.Errorf("MCP server '%s' with stdio transport requires a command.", name)
	case strings.ContainsAny(cmd, "/\\"):
		return fmt.Errorf("MCP server '%s' command must be a bare executable name on the allowlist, not a path. Allowed commands: %s. Configure MCP_MUX_STDIO_COMMAND_ALLOWLIST to extend this list.",
			name, strings.Join(p.allowed, ", "))
	case cmd != strings.TrimSpace(cmd) || strings.ContainsAny(cmd, " \t;|&`$<>\n\r"):
		return fmt.Errorf("MCP server '%s' command must be a bare executable name on the allowlist, without spaces or shell syntax; put parameters in args instead.", name)
	case !slices.Contains(p.allowed, cmd):
		return fmt.Errorf("MCP server '%s' uses disallowed stdio command '%s'. Allowed commands: %s. Configure MCP_MUX_STDIO_COMMAND_ALLOWLIST to extend this list.",
			name, cmd, strings.Join(p.allowed, ", "))
	}
	return nil
}

// checkArgs screens what cmd's args make it run: a launcher's package and
// options, or any other command's code-running flags.
func (p *launchPolicy) checkArgs(name, cmd string, args []string) error {
	if l := launchers[cmd]; l != nil {
		if err := p.checkLauncher(l, cmd, args); err != nil {
			return fmt.Errorf("MCP server '%s' %w", name, err)
		}
		return nil
	}
	if i, flag := execFlag(args); flag != "" {
		return fmt.Errorf("MCP server '%s' passes '%s' (args[%d]) to '%s', which would run arbitrary code. Point the server at a package or module instead.", name, flag, i, cmd)
	}
	return nil
}

// checkLauncher finds what a launcher would run and screens it; the error
// follows "MCP server 'x' ". It steps over the subcommand and the
// launcher's options (each screened), then screens the package.
func (p *launchPolicy) checkLauncher(l *launcher, cmd string, args []string) error {
	i, err := l.subcommand(cmd, args)
	for err == nil && i < len(args) && isOption(args[i]) {
		i, err = p.checkOption(l, cmd, args, i)
	}
	if err != nil {
		return err
	}
	if i < len(args) && args[i] == "--" {
		i++
	}
	if i >= len(args) {
		return fmt.Errorf("gives '%s' no package to run.", cmd)
	}
	return p.checkProgram(cmd, args[i], i, l.pathLookup)
}

// subcommand requires l's subcommand (if it has one) first in args and
// returns the index of the argument after it.
func (l *launcher) subcommand(cmd string, args []string) (int, error) {
	if l.sub == "" {
		return 0, nil
	}
	if len(args) == 0 || args[0] != l.sub {
		return 0, fmt.Errorf("runs '%s' without '%s' first (args[0]); through the API, %s may only run a package with '%s %s'.", cmd, l.sub, cmd, cmd, l.sub)
	}
	return 1, nil
}

// isOption reports whether a launcher argument is an option: it starts
// with "-" and is neither "-" nor the end of options "--".
func isOption(a string) bool {
	return strings.HasPrefix(a, "-") && a != "-" && a != "--"
}

// checkOption screens the launcher option at args[i] (and its value, the
// next argument unless written --opt=value) and returns the index after
// them.
func (p *launchPolicy) checkOption(l *launcher, cmd string, args []string, i int) (int, error) {
	a := args[i]
	flag, value, hasValue := strings.Cut(a, "=")
	if why, ok := l.refusal(flag); ok {
		return i, fmt.Errorf("passes '%s' (args[%d]) to '%s', which %s.", flag, i, cmd, why)
	}
	switch {
	case l.boolean[flag] || l.boolean[a] || hasPrefix(flag, l.prefixes):
		return i + 1, nil
	case !l.valued[flag]:
		return i, fmt.Errorf("passes option '%s' (args[%d]) to '%s' that the launch policy does not know; put the server's own options after the package.", flag, i, cmd)
	}
	at := i
	if !hasValue {
		if i+1 >= len(args) {
			return i, fmt.Errorf("passes '%s' (args[%d]) to '%s' without a value.", flag, i, cmd)
		}
		value, at = args[i+1], i+1
	}
	return at + 1, p.checkValue(l, cmd, flag, value, at)
}

// refusal is why l refuses an option: as written, or a long option in any
// case.
func (l *launcher) refusal(flag string) (string, bool) {
	if why, ok := l.refused[flag]; ok {
		return why, true
	}
	if !strings.HasPrefix(flag, "--") {
		return "", false
	}
	why := l.refused[strings.ToLower(flag)]
	return why, why != ""
}

// checkValue screens a valued option's value (args[at]): an interpreter is
// a version, never a path, and a package is screened as what the launcher
// runs.
func (p *launchPolicy) checkValue(l *launcher, cmd, flag, value string, at int) error {
	if l.interpreter[flag] && strings.ContainsAny(value, `/\`) {
		return fmt.Errorf("passes an interpreter path to '%s' (args[%d]); name a Python version instead.", flag, at)
	}
	if l.packages[flag] {
		return p.checkProgram(cmd, value, at, false)
	}
	return nil
}

// localSpecs start a package spec (lower-cased) that names a local path.
var localSpecs = []string{".", "/", "~", "file:", "link:"}

// checkProgram screens a package spec (or a command) a launcher would run.
func (p *launchPolicy) checkProgram(cmd, spec string, at int, pathLookup bool) error {
	lower := strings.ToLower(spec)
	switch {
	case localSpec(spec, lower):
		return fmt.Errorf("runs a local path through '%s' (args[%d]); name a published package instead.", cmd, at)
	case strings.Contains(lower, "://") || strings.HasPrefix(lower, "git"):
		return nil // a remote package (git, tarball or URL), fetched like any other
	}
	name := programName(spec)
	if deniedProgram(name) {
		return fmt.Errorf("would run '%s' through '%s' (args[%d]), a shell, interpreter, package manager or command runner that runs arbitrary code; point the server at an MCP server package instead.", name, cmd, at)
	}
	if pathLookup && name == spec && !strings.ContainsAny(spec, "@/") {
		return p.checkPathShadow(cmd, spec, at)
	}
	return nil
}

// localSpec reports whether a package spec (and its lower-cased form)
// names a local path, or could be read as one.
func localSpec(spec, lower string) bool {
	return spec == "" || strings.ContainsAny(spec, "\\\x00\n\r") || hasPrefix(lower, localSpecs)
}

// deniedProgram reports whether name is a shell, interpreter (of any
// version), package manager or command runner.
func deniedProgram(name string) bool {
	lower := strings.ToLower(name)
	return deniedPrograms[name] || deniedPrograms[lower] || versioned.MatchString(lower)
}

// checkPathShadow refuses a bare name that is a program on the mux's PATH
// outside node_modules: the launcher would run it instead of a package.
func (p *launchPolicy) checkPathShadow(cmd, spec string, at int) error {
	if path, err := p.lookPath(spec); err == nil && !inNodeModules(path) {
		return fmt.Errorf("names '%s' (args[%d]), a program on the mux's PATH that '%s' would run instead of a package; name the package with a version (%s@latest) or its scope.", spec, at, cmd, spec)
	}
	return nil
}

// programName is the package or program name of a spec: without a scheme
// (npm:, jsr:), version, extras or environment markers.
func programName(spec string) string {
	for _, scheme := range []string{"npm:", "jsr:"} {
		spec = strings.TrimPrefix(spec, scheme)
	}
	scope := ""
	if strings.HasPrefix(spec, "@") {
		if s, rest, ok := strings.Cut(spec[1:], "/"); ok {
			scope, spec = "@"+s+"/", rest
		}
	}
	if i := strings.IndexAny(spec, "@=<>!~[; "); i >= 0 {
		spec = spec[:i]
	}
	return scope + spec
}

// inNodeModules reports whether a program resolves (through symlinks) into
// a node_modules directory: an installed package's bin, not a system program.
func inNodeModules(path string) bool {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "node_modules")
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// execFlag returns the first code-running flag in args and its index, or
// "": short-flag clusters are taken apart and -p is screened too.
func execFlag(args []string) (int, string) {
	for i, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		if f := codeFlag(flag); f != "" {
			return i, f
		}
	}
	return 0, ""
}

// codeFlag is the code-running flag of one option ("" when none): a long
// option in any case, or any flag of a short-flag cluster.
func codeFlag(flag string) string {
	switch {
	case strings.HasPrefix(flag, "--"):
		if execFlags[strings.ToLower(flag)] {
			return flag
		}
	case strings.HasPrefix(flag, "-") && len(flag) > 1:
		for _, c := range flag[1:] {
			if f := "-" + string(c); execFlags[f] || f == "-p" {
				return f
			}
		}
	}
	return ""
}
