package config

import "github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"

// Bounds on what the loader reads, checked on the raw bytes before any
// tree is built, for the file and for an admin API body alike (see
// package rawdoc).
const (
	// MaxFileSize is the largest config file (or admin body) in bytes.
	MaxFileSize = rawdoc.MaxFileSize
	// MaxDepth is the deepest nesting of objects and arrays.
	MaxDepth = rawdoc.MaxDepth
)

// SyntaxError reports a config file that is not well-formed JSON or YAML,
// or one past the bounds. Line and Column are 1-based; 0 means unknown.
type SyntaxError = rawdoc.SyntaxError

// ReadFile reads a config file, refusing one larger than MaxFileSize
// without reading the rest of it.
func ReadFile(path string) ([]byte, error) { return rawdoc.ReadFile(path) }
