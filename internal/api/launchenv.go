package api

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// deniedEnv are environment variables that make a runtime, a shell or a
// launcher load code, or change which program or package runs. Names
// compare case-insensitively (Windows' environment does, and npm reads its
// config keys in any case).
var deniedEnv = set(
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
	"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS",
	"PERLLIB", "RUBYOPT", "RUBYLIB", "CLASSPATH",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
	"PATH", "HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "SSH_ASKPASS",
)

// deniedEnvPrefixes are variable families of the same kind: npm, yarn, bun,
// deno, uv, pip and pipx settings (registries, scripts, config files,
// interpreters), the dynamic loader's LD_* and DYLD_*, Python's, Perl's and
// git's (GIT_SSH_COMMAND, GIT_CONFIG_*, …), and bash's exported functions.
var deniedEnvPrefixes = []string{
	"NPM_CONFIG_", "YARN_", "PNPM_", "BUN_", "DENO_", "UV_", "PIP_", "PIPX_",
	"LD_", "DYLD_", "PYTHON", "PERL5", "GIT_", "BASH_FUNC_",
}

// allowedPython are PYTHON* variables that only toggle behaviour.
var allowedPython = set("PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8")

// deniedEnvKey reports why an environment key is refused, or "".
func deniedEnvKey(key string) string {
	if key == "" || strings.ContainsAny(key, "=\x00") || strings.TrimSpace(key) != key {
		return "is not a valid environment variable name"
	}
	k := strings.ToUpper(key)
	if deniedEnv[k] || (hasPrefix(k, deniedEnvPrefixes) && !allowedPython[k]) {
		return "makes a runtime, shell or launcher load code or run something else"
	}
	return ""
}

// checkEnv refuses the first denied key of env, in name order.
func checkEnv(server string, env map[string]secret.Value) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if why := deniedEnvKey(k); why != "" {
			return fmt.Errorf("MCP server '%s' sets environment variable '%s', which %s; set it in the config file instead.", server, k, why)
		}
	}
	return nil
}
