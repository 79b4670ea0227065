package rawdoc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Bounds on what the loader reads. Both are checked on the raw bytes
// before any tree is built, for the file and for an admin API body alike,
// so that the cost of a load is linear in its size and a hostile document
// is refused for the price of one scan.
const (
	// MaxFileSize is the largest config file (or admin body) in bytes. A
	// real config with hundreds of servers is tens of kilobytes.
	MaxFileSize = 4 << 20
	// MaxDepth is the deepest nesting of objects and arrays (mappings and
	// sequences in YAML, counting the top-level object as 1). mcp-mux's own
	// keys nest six deep; the rest is room for DeerFlow's extra keys.
	MaxDepth = 64
)

// ReadFile reads a config file, refusing one larger than MaxFileSize
// without reading the rest of it.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, errTooBig(path, -1)
	}
	return data, nil
}

func errTooBig(file string, size int) error {
	what := "larger than"
	if size >= 0 {
		what = fmt.Sprintf("%d bytes, over", size)
	}
	return &SyntaxError{File: file, Msg: fmt.Sprintf("the config is %s the %d-byte (4 MiB) bound on config size", what, MaxFileSize)}
}

// tooDeepMsg is the message for a value nested deeper than MaxDepth.
func tooDeepMsg() string {
	return fmt.Sprintf("objects and arrays nest deeper than %d levels, the bound on config nesting", MaxDepth)
}

// checkJSONBounds refuses JSON larger than MaxFileSize or nested deeper
// than MaxDepth, naming the line and column of the first bracket too deep.
func checkJSONBounds(data []byte, file string) error {
	if len(data) > MaxFileSize {
		return errTooBig(file, len(data))
	}
	if at := wire.TooDeepAt(data, MaxDepth); at >= 0 {
		return syntaxAtOffset(file, data, int64(at)+1, tooDeepMsg())
	}
	return nil
}

// checkYAMLBounds is checkJSONBounds for YAML, with yamlTooDeep as the
// depth scan.
func checkYAMLBounds(data []byte, file string) error {
	if len(data) > MaxFileSize {
		return errTooBig(file, len(data))
	}
	if at := yamlTooDeep(data); at >= 0 {
		return syntaxAtOffset(file, data, int64(at)+1, tooDeepMsg())
	}
	return nil
}

// SyntaxError reports a config file that is not well-formed JSON or YAML.
// Line and Column are 1-based; 0 means unknown.
type SyntaxError struct {
	File         string
	Line, Column int
	Msg          string
}

// Error returns "file:line:col: msg", omitting unknown parts.
func (e *SyntaxError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// TrimBOM drops a leading UTF-8 byte order mark.
func TrimBOM(data []byte) []byte {
	if len(data) >= 3 && data[0] == 0xef && data[1] == 0xbb && data[2] == 0xbf {
		return data[3:]
	}
	return data
}

// Decode decodes data as YAML when filename ends in ".yaml" or ".yml",
// else as JSON; filename names the input in errors.
func Decode(data []byte, filename string) (*Node, []DupKey, error) {
	switch strings.ToLower(filepath.Ext(filename)) {
	case ".yaml", ".yml":
		return DecodeYAML(data, filename)
	default:
		return DecodeJSON(data, filename)
	}
}
