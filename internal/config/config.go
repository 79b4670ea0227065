// Package config loads and validates the mcp-mux config file: DeerFlow's
// extensions_config.json (which must load unchanged) plus the mux-specific
// top-level blocks guardrails, tool_search, mcp_tasks, store, inbound and
// admin.
//
// Loading is pure: it reads nothing but the file and the environment lookup
// it is given, logs nothing and returns warnings as data. Every string value
// in the document goes through DeerFlow's whole-string $VAR expansion before
// validation. A server that fails validation is reported in Config.Invalid and
// skipped; it never takes the other servers down. Problems in the mux blocks
// fail the whole load. No error or warning ever contains a configured value
// that may be a secret; credential values are held as secret.Value.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// Config is a validated config file.
type Config struct {
	// Path is the file the config was read from (LoadOptions.Filename for Parse).
	Path string
	// Servers are the valid servers, enabled or not, in file order.
	Servers []*Server
	// Invalid are the servers that failed validation, in file order. They are
	// reported and skipped, never fatal.
	Invalid []ServerError
	// Warnings are non-fatal notes about the file.
	Warnings []Problem
	// Interceptors are the mcpInterceptors names; a single string is
	// normalized to a one-element list.
	Interceptors []string
	Guardrails   Guardrails
	ToolSearch   ToolSearch
	// Tasks is the "mcp_tasks" block.
	Tasks     Tasks
	Store     Store
	Inbound   Inbound
	Admin     Admin
	Telemetry Telemetry
	// Profiles is the "profiles" block by name; nil when there is none.
	Profiles map[string]*Profile
	// Limits is the "limits" block (config/limits.go).
	Limits Limits
	// Approvals is the "approvals" block (config/approvals.go).
	Approvals Approvals
	// Policy is the "policy" block (config/policy.go).
	Policy Policy
	// Processors is the top-level "processors" list (config/processors.go):
	// asked about every server's calls, before a server's own.
	Processors []Processor
	// ResultGuards is the "result_guards" block (config/resultguards.go);
	// nil: none. A server's own block replaces it (ResultGuardsFor).
	ResultGuards *ResultGuards
	// Extra holds the unknown top-level keys (DeerFlow's "middlewares",
	// "skills", …) verbatim, as written before $VAR expansion.
	Extra map[string]json.RawMessage
}

// Server returns the valid server with the given name, or nil.
func (c *Config) Server(name string) *Server {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// LoadOptions configures Load and Parse.
type LoadOptions struct {
	// Filename names the input in messages and selects the format: ".yaml"
	// and ".yml" are YAML, anything else is JSON. Load defaults it to the path.
	Filename string
	// LookupEnv resolves $VAR references; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Listen is the address (host:port) the mux listens on, when known: a
	// server whose url points at it is invalid.
	Listen string
}

// Load reads and parses the config file at path. See Parse for the errors.
func Load(path string, opts LoadOptions) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	if opts.Filename == "" {
		opts.Filename = path
	}
	return Parse(data, opts)
}

// Parse parses and validates a config file's contents.
//
// It returns a *SyntaxError for malformed JSON or YAML. Problems in the
// top-level blocks (mcpServers not an object, guardrails, tool_search,
// mcp_tasks, store, inbound, admin) are returned as errors.Join of Problem
// values (see Problems); the Config is then still returned, so that a
// validator can report server problems too, but it must not be served.
// Invalid servers alone are not an error: they are listed in Config.Invalid.
func Parse(data []byte, opts LoadOptions) (*Config, error) {
	root, dups, err := rawdoc.Decode(rawdoc.TrimBOM(data), opts.Filename)
	if err != nil {
		return nil, err
	}
	if root.Kind != rawdoc.Object {
		return nil, errors.Join(Problem{Message: "the config file must contain an object at the top level"})
	}
	expand(root, opts.lookup())
	cfg := &Config{Path: opts.Filename}
	for _, d := range dups {
		cfg.Warnings = append(cfg.Warnings, duplicateWarning(d))
	}
	problems := cfg.parseServers(root.Get("mcpServers"), opts.Listen, filepath.Dir(opts.Filename))
	cfg.parseInterceptors(root.Get("mcpInterceptors"))
	problems = append(problems, cfg.parseMuxBlocks(root)...)
	cfg.keepUnknown(root)
	return cfg, joinProblems(problems)
}

// lookup returns LookupEnv, or os.LookupEnv when it is nil.
func (o LoadOptions) lookup() func(string) (string, bool) {
	if o.LookupEnv == nil {
		return os.LookupEnv
	}
	return o.LookupEnv
}

// keepUnknown keeps the unknown top-level keys verbatim in c.Extra,
// warning about those that look like a misspelled known key.
func (c *Config) keepUnknown(root *rawdoc.Node) {
	for i, k := range root.Keys {
		if slices.Contains(topLevelKeys, k) {
			continue
		}
		if lk := likelyKey(k, topLevelKeys); lk != "" {
			c.Warnings = append(c.Warnings, Problem{Field: k, Message: fmt.Sprintf("unknown top-level key, kept but not used; did you mean %q?", lk)})
		}
		if c.Extra == nil {
			c.Extra = map[string]json.RawMessage{}
		}
		c.Extra[k] = root.Vals[i].JSON()
	}
}

// joinProblems returns problems as one errors.Join error, or nil.
func joinProblems(problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// duplicateWarning words the warning of a duplicate key: a server defined
// twice, or a key inside a server or elsewhere.
func duplicateWarning(d rawdoc.DupKey) Problem {
	if len(d.Path) == 2 && d.Path[0] == "mcpServers" {
		return Problem{Server: d.Path[1], Message: "server is defined more than once; the last definition is used"}
	}
	p := Problem{Field: strings.Join(d.Path, "."), Message: "duplicate key; the last value is used"}
	if len(d.Path) > 2 && d.Path[0] == "mcpServers" {
		p.Server, p.Field = d.Path[1], strings.Join(d.Path[2:], ".")
	}
	return p
}

// parseServers validates every server in file order and returns the fatal
// problems (only when mcpServers itself is malformed).
func (c *Config) parseServers(n *rawdoc.Node, listen, dir string) []Problem {
	if n == nil || n.Kind == rawdoc.Null {
		return nil
	}
	if n.Kind != rawdoc.Object {
		return []Problem{{Field: "mcpServers", Message: "must be an object mapping server names to server settings"}}
	}
	for i, name := range n.Keys {
		s, res := parseServer(name, n.Vals[i])
		c.Warnings = append(c.Warnings, res.warnings...)
		if len(res.problems) == 0 {
			res.problems = append(selfProblems(s, listen), cwdProblems(s, dir)...)
		}
		if len(res.problems) > 0 {
			c.Invalid = append(c.Invalid, ServerError{Name: name, Problems: res.problems})
			continue
		}
		c.Servers = append(c.Servers, s)
	}
	return nil
}

// parseInterceptors follows DeerFlow: a list of strings, or one string; any
// other shape is skipped with a warning.
func (c *Config) parseInterceptors(n *rawdoc.Node) {
	if n == nil || n.Kind == rawdoc.Null {
		return
	}
	switch n.Kind {
	case rawdoc.String:
		c.Interceptors = []string{n.Value}
	case rawdoc.Array:
		c.Interceptors = []string{}
		for i, item := range n.Items {
			if item.Kind != rawdoc.String {
				c.Warnings = append(c.Warnings, Problem{Field: fmt.Sprintf("mcpInterceptors[%d]", i), Message: "must be a string; skipping"})
				continue
			}
			c.Interceptors = append(c.Interceptors, item.Value)
		}
	default:
		c.Warnings = append(c.Warnings, Problem{Field: "mcpInterceptors", Message: "mcpInterceptors must be a list of strings, got " + kindName(n.Kind) + "; skipping"})
	}
}
