package api

// DeerFlow's stdio launch policy for servers written through the admin API
// (research deerflow.md §7.3), defense in depth: the API can be reached over
// the network, the file cannot, so only API writes are screened. The file
// itself may express anything.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/config"
)

// defaultStdioCommands are always allowed; AdminOptions.StdioCommands adds more.
var defaultStdioCommands = []string{"npx", "uvx"}

// execFlags run code given on the command line.
var execFlags = map[string]bool{
	"-c": true, "--call": true, "-e": true, "--eval": true, "--print": true,
	"--shell": true, "--node-arg": true, "--node-options": true,
}

// npxBoolean are npm/npx options that take no value (an unknown npx option
// is taken to consume one).
var npxBoolean = map[string]bool{
	"-y": true, "--yes": true, "--no": true, "--no-install": true, "--ignore-existing": true, "-q": true,
	"--quiet": true, "--silent": true, "--prefer-offline": true, "--prefer-online": true, "--offline": true,
	"--no-audit": true, "--no-fund": true, "--no-update-notifier": true, "-d": true, "--loglevel=silent": true,
}

// uvxValued are uvx options that take a value (an unknown uvx option is
// taken to take none).
var uvxValued = map[string]bool{
	"--from": true, "--with": true, "--with-editable": true, "--with-requirements": true, "-p": true,
	"--python": true, "--index": true, "--index-url": true, "-i": true, "--extra-index-url": true,
	"--find-links": true, "-f": true, "-c": true, "--constraints": true, "--overrides": true,
	"--build-constraints": true, "-P": true, "--upgrade-package": true, "--reinstall-package": true,
	"--refresh-package": true, "--directory": true, "--project": true, "--config-file": true,
	"--cache-dir": true, "--index-strategy": true, "--keyring-provider": true, "--resolution": true,
	"--prerelease": true, "--exclude-newer": true, "--link-mode": true, "--color": true, "--python-platform": true,
}

// deniedEnv run code when a process starts.
var deniedEnv = map[string]bool{
	"BASH_ENV": true, "DYLD_INSERT_LIBRARIES": true, "ENV": true, "LD_AUDIT": true, "LD_PRELOAD": true,
	"NODE_OPTIONS": true, "PERL5OPT": true, "PYTHONHOME": true, "PYTHONPATH": true, "PYTHONSTARTUP": true, "RUBYOPT": true,
}

// checkLaunch applies the policy to one server; non-stdio servers pass.
func checkLaunch(s *config.Server, extra []string) error {
	if s.Type != config.TypeStdio {
		return nil
	}
	name, cmd := s.Name, s.Command
	if cmd == "" {
		return fmt.Errorf("MCP server '%s' with stdio transport requires a command.", name)
	}
	if cmd != strings.TrimSpace(cmd) || strings.ContainsAny(cmd, "/\\ \t;|&`$<>\n\r") {
		return fmt.Errorf("MCP server '%s' command must be a single executable name; put parameters in args instead.", name)
	}
	allowed := append(slices.Clone(defaultStdioCommands), extra...)
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	if !slices.Contains(allowed, cmd) {
		return fmt.Errorf("MCP server '%s' uses disallowed stdio command '%s'. Allowed commands: %s. Configure MCP_MUX_STDIO_COMMAND_ALLOWLIST to extend this list.",
			name, cmd, strings.Join(allowed, ", "))
	}
	if flag := execFlag(cmd, s.Args); flag != "" {
		return fmt.Errorf("MCP server '%s' passes '%s' to '%s', which would run arbitrary code. Point the server at a package or module instead.", name, flag, cmd)
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if deniedEnv[strings.ToUpper(k)] {
			return fmt.Errorf("MCP server '%s' sets environment variable '%s', which would run arbitrary code at process startup.", name, k)
		}
	}
	return nil
}

// execFlag returns the first code-running flag in args, or "". For npx and
// uvx only the launcher's own options (before the package or a bare "--")
// are screened; for any other command every argument is, with short-flag
// clusters taken apart and -p screened too.
func execFlag(cmd string, args []string) string {
	switch cmd {
	case "npx", "uvx":
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "--" || !strings.HasPrefix(a, "-") {
				return ""
			}
			flag, _, hasValue := strings.Cut(a, "=")
			if isExec(flag, cmd) {
				return flag
			}
			if hasValue {
				continue
			}
			if cmd == "npx" && !npxBoolean[a] && !npxBoolean[strings.ToLower(a)] {
				i++ // an npx option with its value
			}
			if cmd == "uvx" && uvxValued[a] {
				i++
			}
		}
		return ""
	}
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
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
	}
	return ""
}

// isExec reports whether a launcher option runs code: uvx keeps only the
// long spellings (its -c is --constraints).
func isExec(flag, cmd string) bool {
	if strings.HasPrefix(flag, "--") {
		return execFlags[strings.ToLower(flag)]
	}
	return cmd == "npx" && execFlags[flag]
}
