package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// parseFlags parses a command's flags. -h/--help prints its usage on stdout
// and ends the command with exit 0; a bad flag ends it with exit 2 (the
// message on the flag set's output, stderr).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, code int) {
	if wantsHelp(args) {
		fs.SetOutput(stdout)
	}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return true, 0
	}
	if err != nil {
		return true, 2
	}
	return false, 0
}

// wantsHelp reports whether args ask for help before any other argument.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "--h":
			return true
		case "--":
			return false
		}
	}
	return false
}

// validate loads the config exactly as serve does, connects to nothing, and
// prints every problem as file:server:field: message.
func validate(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	fs, path, dataDir := validateFlagSet(stderr)
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	p, err := validatePath(fs, *path, env)
	if err != nil {
		fmt.Fprintln(stderr, "mcp-mux validate:", err)
		return 2
	}
	cfg, err := config.Load(p, config.LoadOptions{LookupEnv: env})
	if err != nil {
		printLoadError(stderr, p, err)
		if cfg != nil {
			// Top-level problems come with the parsed config: report its
			// warnings and server problems too, so that one run shows
			// everything.
			printWarnings(stderr, p, cfg)
			printServerProblems(stderr, p, cfg)
		}
		return 1
	}
	return reportValidation(p, cfg, cmp.Or(*dataDir, lookup(env, "MCP_MUX_DATA_DIR")), env, stdout, stderr)
}

// validateFlagSet returns validate's flag set and its --config and
// --data-dir flags.
func validateFlagSet(stderr io.Writer) (*flag.FlagSet, *string, *string) {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file to check (env MCP_MUX_CONFIG); or give it as the argument")
	dataDir := fs.String("data-dir", "", "the embedded task store's directory, as serve gets it (env MCP_MUX_DATA_DIR)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mcp-mux validate [--data-dir DIR] [--config] PATH\n\nLoads and validates PATH exactly as serve does and connects to nothing:\nprints every error and warning; exit 1 on errors.")
		fs.PrintDefaults()
	}
	return fs, path, dataDir
}

// validatePath returns the config file to validate: the argument, else
// --config, else MCP_MUX_CONFIG.
func validatePath(fs *flag.FlagSet, path string, env func(string) (string, bool)) (string, error) {
	switch {
	case fs.NArg() > 1 || fs.NArg() == 1 && path != "":
		return "", errors.New("give one config file, as --config PATH or PATH")
	case fs.NArg() == 1:
		path = fs.Arg(0)
	}
	path = cmp.Or(path, lookup(env, "MCP_MUX_CONFIG"))
	if path == "" {
		return "", errors.New("a config file is required (mcp-mux validate PATH)")
	}
	return path, nil
}

// printWarnings prints the warnings of the config loaded from path, and
// what serve warns about when it applies it (interceptors).
func printWarnings(stderr io.Writer, path string, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning: "+w.Format(path))
	}
	for _, w := range proxy.ConfigWarnings(cfg) {
		fmt.Fprintln(stderr, "warning: "+path+": "+w)
	}
}

// reportValidation prints the warnings and server problems of the config
// loaded from path and a verdict, and returns the exit code: 1 when a
// server is invalid or serve would refuse the task settings (the embedded
// store's directory resolved from dataDir and env as serve does).
func reportValidation(path string, cfg *config.Config, dataDir string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	printWarnings(stderr, path, cfg)
	printServerProblems(stderr, path, cfg)
	enabled := enabledServers(cfg)
	if len(cfg.Invalid) > 0 {
		fmt.Fprintf(stderr, "%s: %d invalid server(s); %d valid (%d enabled)\n", path, len(cfg.Invalid), len(cfg.Servers), enabled)
		return 1
	}
	// serve refuses to start on this (DeerFlow's startup rule).
	if err := proxy.TaskStartupError(cfg); err != nil {
		fmt.Fprintf(stderr, "%s: mcp_tasks: %v\n", path, err)
		return 1
	}
	if _, err := taskDataDir(cfg, dataDir, env); err != nil {
		fmt.Fprintf(stderr, "%s: mcp_tasks: %v\n", path, err)
		return 1
	}
	if s := cfg.Store; !s.RedisURL.IsZero() {
		// go-redis's own parse, as serve does it (the config checks only
		// the scheme and the mode's must-haves).
		if _, err := storeclient.Parse(s.RedisMode, s.RedisURL); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "%s: ok, %d server(s), %d enabled\n", path, len(cfg.Servers), enabled)
	return 0
}

// enabledServers counts the enabled servers of cfg.
func enabledServers(cfg *config.Config) int {
	n := 0
	for _, s := range cfg.Servers {
		if s.Enabled {
			n++
		}
	}
	return n
}

// printServerProblems prints the problems of each invalid server.
func printServerProblems(w io.Writer, path string, cfg *config.Config) {
	for _, se := range cfg.Invalid {
		for _, p := range se.Problems {
			fmt.Fprintln(w, p.Format(path))
		}
	}
}

// printLoadError prints a syntax error or every top-level problem.
func printLoadError(w io.Writer, path string, err error) {
	var problems interface{ Unwrap() []error }
	if errors.As(err, &problems) {
		for _, e := range problems.Unwrap() {
			var p config.Problem
			if errors.As(e, &p) {
				fmt.Fprintln(w, p.Format(path))
				continue
			}
			fmt.Fprintln(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}
