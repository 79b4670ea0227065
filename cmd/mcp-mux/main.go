// Command mcp-mux runs the mcp-mux MCP proxy.
//
//	mcp-mux serve [--config PATH] [--listen ADDR] [--ops-listen ADDR] [--shutdown-delay DURATION] [--data-dir DIR] [--log-format json|text] [--log-level LEVEL]
//	mcp-mux validate [--data-dir DIR] [--config] PATH
//	mcp-mux version
//	mcp-mux help [COMMAND]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	// A stdio server's supervisor is this binary re-executed (upstream.Options.Supervisor).
	if code, ok := upstream.RunSupervisor(); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

const usage = `mcp-mux is an MCP proxy and multiplexer: one Streamable HTTP endpoint in front of every
MCP server in its config file (DeerFlow's extensions_config.json).

usage:
  mcp-mux serve [--config PATH] [--listen ADDR] [--ops-listen ADDR] [--shutdown-delay DURATION] [--data-dir DIR] [--log-format json|text] [--log-level LEVEL]
  mcp-mux validate [--data-dir DIR] [--config] PATH
  mcp-mux version
  mcp-mux help [COMMAND]

commands:
  serve      serve /mcp and the HTTP endpoints (health, metrics, status, admin and task APIs)
  validate   check a config file as serve would (the same errors and warnings); connects to nothing
  version    print the version
  help       print this help, or a command's flags ("mcp-mux help serve", "mcp-mux serve --help")
`

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, env)
	case "validate":
		return validate(args[1:], stdout, stderr, env)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "mcp-mux", version)
		return 0
	case "help", "-h", "-help", "--help":
		return help(ctx, args[1:], stdout, stderr, env)
	}
	fmt.Fprintf(stderr, "mcp-mux: unknown command %q\n%s", args[0], usage)
	return 2
}

// help prints the usage, or the flags of the command args name.
func help(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	if len(args) > 0 && (args[0] == "serve" || args[0] == "validate") {
		return run(ctx, []string{args[0], "--help"}, stdout, stderr, env)
	}
	fmt.Fprint(stdout, usage)
	return 0
}
