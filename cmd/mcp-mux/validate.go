package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/proxy"
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
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file to check (env MCP_MUX_CONFIG); or give it as the argument")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mcp-mux validate [--config] PATH\n\nLoads and validates PATH exactly as serve does and connects to nothing:\nprints every error and warning; exit 1 on errors.")
		fs.PrintDefaults()
	}
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	switch {
	case fs.NArg() > 1 || fs.NArg() == 1 && *path != "":
		fmt.Fprintln(stderr, "mcp-mux validate: give one config file, as --config PATH or PATH")
		return 2
	case fs.NArg() == 1:
		*path = fs.Arg(0)
	}
	if *path == "" {
		if v, ok := env("MCP_MUX_CONFIG"); ok {
			*path = v
		}
	}
	if *path == "" {
		fmt.Fprintln(stderr, "mcp-mux validate: a config file is required (mcp-mux validate PATH)")
		return 2
	}
	cfg, err := config.Load(*path, config.LoadOptions{LookupEnv: env})
	if err != nil {
		printLoadError(stderr, *path, err)
		if cfg != nil {
			// Top-level problems come with the parsed config: report the
			// server problems too, so that one run shows every error.
			printServerProblems(stderr, *path, cfg)
		}
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning: "+w.Format(*path))
	}
	// What serve warns about when it applies the config (interceptors).
	for _, w := range proxy.ConfigWarnings(cfg) {
		fmt.Fprintln(stderr, "warning: "+*path+": "+w)
	}
	printServerProblems(stderr, *path, cfg)
	enabled := 0
	for _, s := range cfg.Servers {
		if s.Enabled {
			enabled++
		}
	}
	if len(cfg.Invalid) > 0 {
		fmt.Fprintf(stderr, "%s: %d invalid server(s); %d valid (%d enabled)\n", *path, len(cfg.Invalid), len(cfg.Servers), enabled)
		return 1
	}
	// serve refuses to start on this (DeerFlow's startup rule).
	if err := proxy.TaskStartupError(cfg); err != nil {
		fmt.Fprintf(stderr, "%s: mcp_tasks: %v\n", *path, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok, %d server(s), %d enabled\n", *path, len(cfg.Servers), enabled)
	return 0
}

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
