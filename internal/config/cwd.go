package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// readCwd reads a server's "cwd", the working directory of a stdio
// server's processes, as written after $VAR expansion ("" when absent,
// null or empty). A value from an unset variable is a problem: the server
// would start wherever mcp-mux was started. On an http or sse server it is
// ignored with a warning.
func (s *Server) readCwd(o *object) {
	n := o.n.Get("cwd")
	s.Cwd = o.str("cwd", "")
	if n != nil && n.Kind == rawdoc.String && n.Value == "" && n.Unset != "" {
		o.f.problem(o.field("cwd"), "is empty because the environment variable %s is not set; set it, or remove cwd to start the server in mcp-mux's working directory", n.Unset)
	}
	if s.Cwd != "" && s.Type != TypeStdio {
		o.f.warn(o.field("cwd"), "a working directory only applies to stdio servers; cwd is ignored for this %s server", s.Type)
		s.Cwd = ""
	}
}

// cwdProblems resolves a stdio server's cwd to an absolute path, a
// relative one against dir (the config file's directory), and requires
// an existing directory there.
func cwdProblems(s *Server, dir string) []Problem {
	if s.Cwd == "" {
		return nil
	}
	p := s.Cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	problem := func(msg string) []Problem {
		return []Problem{{Server: s.Name, Field: "cwd", Message: msg}}
	}
	switch fi, err := os.Stat(p); {
	case err != nil && os.IsNotExist(err):
		return problem(strconv.Quote(p) + " does not exist" + relativeNote(s.Cwd))
	case err != nil:
		return problem(strconv.Quote(p) + " cannot be used: " + strings.TrimPrefix(err.Error(), "stat "+p+": "))
	case !fi.IsDir():
		return problem(strconv.Quote(p) + " is not a directory" + relativeNote(s.Cwd))
	}
	s.Cwd = p
	return nil
}

// relativeNote says how a relative cwd was resolved.
func relativeNote(written string) string {
	if filepath.IsAbs(written) {
		return ""
	}
	return " (a relative cwd is taken from the config file's directory)"
}
