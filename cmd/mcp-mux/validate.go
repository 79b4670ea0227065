package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mcp-mux/mcp-mux/config"
)

// validate loads the config exactly as serve does, connects to nothing, and
// prints every problem as file:server:field: message.
func validate(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file to check (env MCP_MUX_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		if v, ok := env("MCP_MUX_CONFIG"); ok {
			*path = v
		}
	}
	if *path == "" {
		fmt.Fprintln(stderr, "mcp-mux validate: --config is required")
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
