package mcptest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A skills server (SEP-2640, io.modelcontextprotocol/skills with
// directoryRead): each skill is a directory of files under
// skill://<skill>/, SKILL.md first, served as resources, listed by
// skills/list (one entry a page, so paging is exercised), returned by
// skills/get, and walked by resources/directory/read (inode/directory
// children for subdirectories).

// SkillFile is one file of a fixture skill, by its path in the skill.
type SkillFile struct {
	Path, Text string
}

// FixtureSkill is one skill of a skills server.
type FixtureSkill struct {
	Name, Description string
	Files             []SkillFile // besides SKILL.md
}

// SkillsServer is a skills server and what it was asked.
type SkillsServer struct {
	*mcp.Server
	// Reads counts resources/read, skills/get and directory reads.
	Reads atomic.Int64
	// LastURI is the URI of the last resources/read, skills/get or
	// directory read.
	LastURI atomic.Value
	skills  []FixtureSkill
}

// skillsParams are the params of the extension's methods.
type skillsParams struct {
	mcp.ParamsBase
	URI    string `json:"uri,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// NewSkillsServer returns a go-sdk server named name serving skills, and
// a tool "whoami" answering its name.
func NewSkillsServer(name string, skills ...FixtureSkill) *SkillsServer {
	caps := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{ListChanged: true}, Tools: &mcp.ToolCapabilities{}}
	caps.AddExtension("io.modelcontextprotocol/skills", map[string]any{"directoryRead": true})
	s := &SkillsServer{Server: mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{Capabilities: caps}), skills: skills}
	mcp.AddTool(s.Server, &mcp.Tool{Name: "whoami", InputSchema: emptySchema()}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return text(name), nil, nil
	})
	for _, sk := range skills {
		for _, f := range s.files(sk) {
			r := &mcp.Resource{URI: "skill://" + sk.Name + "/" + f.Path, Name: f.Path, MIMEType: "text/markdown"}
			if f.Path == "SKILL.md" {
				r.Name, r.Description = sk.Name, sk.Description
			}
			text := f.Text
			s.AddResource(r, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				s.note(req.Params.URI)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: r.MIMEType, Text: text}}}, nil
			})
		}
	}
	_ = mcp.AddReceivingCustomMethod(s.Server, "skills/list", s.list)
	_ = mcp.AddReceivingCustomMethod(s.Server, "skills/get", s.get)
	_ = mcp.AddReceivingCustomMethod(s.Server, "resources/directory/read", s.dir)
	return s
}

func (s *SkillsServer) note(uri string) {
	s.Reads.Add(1)
	s.LastURI.Store(uri)
}

// manifest is a skill's SKILL.md.
func manifest(sk FixtureSkill) string {
	return fmt.Sprintf("---\nname: %s\ndescription: %s\n---\n\n# %s\n\nUse the files beside this one.\n", sk.Name, sk.Description, sk.Name)
}

// files are a skill's files, SKILL.md first.
func (s *SkillsServer) files(sk FixtureSkill) []SkillFile {
	return append([]SkillFile{{Path: "SKILL.md", Text: manifest(sk)}}, sk.Files...)
}

// entry is a skill's skills/list entry.
func (s *SkillsServer) entry(sk FixtureSkill) map[string]any {
	var res []map[string]any
	for _, f := range s.files(sk) {
		sum := sha256.Sum256([]byte(f.Text))
		res = append(res, map[string]any{"uri": "skill://" + sk.Name + "/" + f.Path, "digest": "sha256:" + hex.EncodeToString(sum[:]), "size": len(f.Text)})
	}
	return map[string]any{"uri": "skill://" + sk.Name + "/SKILL.md",
		"frontmatter": map[string]any{"name": sk.Name, "description": sk.Description}, "resources": res}
}

func (s *SkillsServer) list(_ context.Context, _ *mcp.ServerSession, p *skillsParams) (*skillsResult, error) {
	i := 0
	if p != nil && p.Cursor != "" {
		if _, err := fmt.Sscanf(p.Cursor, "page-%d", &i); err != nil || i < 0 || i >= len(s.skills) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
		}
	}
	out := map[string]any{"skills": []any{}, "ttlMs": 60000, "cacheScope": "public"}
	if i < len(s.skills) {
		out["skills"] = []any{s.entry(s.skills[i])}
	}
	if i+1 < len(s.skills) {
		out["nextCursor"] = fmt.Sprintf("page-%d", i+1)
	}
	return &skillsResult{m: out}, nil
}

func (s *SkillsServer) get(_ context.Context, _ *mcp.ServerSession, p *skillsParams) (*skillsResult, error) {
	s.note(p.URI)
	for _, sk := range s.skills {
		if p.URI == "skill://"+sk.Name+"/SKILL.md" {
			return &skillsResult{m: map[string]any{"skill": s.entry(sk), "ttlMs": 60000, "cacheScope": "public"}}, nil
		}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown skill"}
}

func (s *SkillsServer) dir(_ context.Context, _ *mcp.ServerSession, p *skillsParams) (*skillsResult, error) {
	s.note(p.URI)
	dir := strings.TrimSuffix(p.URI, "/") + "/"
	var children []map[string]any
	var subdirs []string
	for _, sk := range s.skills {
		for _, f := range s.files(sk) {
			full := "skill://" + sk.Name + "/" + f.Path
			rest, ok := strings.CutPrefix(full, dir)
			if !ok {
				continue
			}
			if sub, _, nested := strings.Cut(rest, "/"); nested {
				if !slices.Contains(subdirs, sub) {
					subdirs = append(subdirs, sub)
					children = append(children, map[string]any{"uri": dir + sub, "name": sub, "mimeType": "inode/directory"})
				}
				continue
			}
			children = append(children, map[string]any{"uri": full, "name": rest, "mimeType": "text/markdown"})
		}
	}
	if children == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "not a directory"}
	}
	return &skillsResult{m: map[string]any{"resources": children, "ttlMs": 60000, "cacheScope": "public"}}, nil
}

// skillsResult is a result of the extension's methods as raw members.
type skillsResult struct {
	mcp.ResultBase
	m map[string]any
}

// MarshalJSON encodes the members.
func (r *skillsResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.m) }
