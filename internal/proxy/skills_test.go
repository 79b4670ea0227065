package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// The skills extension (SEP-2640) through the mux: two skill servers,
// alpha and beta, both serving a skill named "shared"; the merged
// skills/list names each server's skills under its authority, reads and
// skills/get reach the server that owns the URI with the URI it serves,
// profile a (alpha only) neither lists nor reads beta's skills, and the
// guardrails hide skill:beta_code-review. Both eras, both upstream eras.

// skillParams are the params of the extension's methods as a client sends them.
type skillParams struct {
	mcp.ParamsBase
	URI    string `json:"uri,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// rawResult is a result kept as its bytes.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) UnmarshalJSON(b []byte) error {
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}

// skillServers are the two fixtures.
func skillServers() (alpha, beta *mcptest.SkillsServer) {
	alpha = mcptest.NewSkillsServer("alpha",
		mcptest.FixtureSkill{Name: "pdf-tools", Description: "alpha fills PDF forms", Files: []mcptest.SkillFile{{Path: "templates/form.md", Text: "alpha form"}}},
		mcptest.FixtureSkill{Name: "shared", Description: "alpha's shared skill"})
	beta = mcptest.NewSkillsServer("beta",
		mcptest.FixtureSkill{Name: "code-review", Description: "beta reviews code"},
		mcptest.FixtureSkill{Name: "shared", Description: "beta's shared skill"})
	return alpha, beta
}

// skillsMux fronts the fixtures (upstreamEra: the servers' pinned
// protocol_version, "auto" to negotiate).
func skillsMux(t *testing.T, upstreamEra string) (*mux, *mcptest.SkillsServer, *mcptest.SkillsServer) {
	t.Helper()
	alpha, beta := skillServers()
	ua, ub := mcptest.ServeHTTPBothEras(t, alpha.Server), mcptest.ServeHTTPBothEras(t, beta.Server)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {
	    "alpha": {"type": "http", "url": %q, "protocol_version": %q},
	    "beta": {"type": "http", "url": %q, "protocol_version": %q}},
	  "profiles": {"a": {"servers": ["alpha"]}},
	  "guardrails": {"denied_tools": ["skill:beta_code-review"]}}`, ua.URL+"/mcp", upstreamEra, ub.URL+"/mcp", upstreamEra), proxy.Options{})
	return m, alpha, beta
}

// skillsClient connects to endpoint in era, able to call the extension's methods.
func skillsClient(t *testing.T, endpoint, era string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "skills-client", Version: "1"}, nil)
	for _, m := range []string{"skills/list", "skills/get", "resources/directory/read"} {
		if err := mcp.AddSendingCustomMethod[*skillParams, *rawResult](c, m); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: testHTTP}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect %s: %v", era, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callSkills(t *testing.T, cs *mcp.ClientSession, method string, p *skillParams) (map[string]json.RawMessage, error) {
	t.Helper()
	res, err := mcp.CallCustomMethod[*skillParams, *rawResult](context.Background(), cs, method, p)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res.raw, &m); err != nil {
		t.Fatalf("%s: %v in %s", method, err, res.raw)
	}
	return m, nil
}

// skillEntry is a skills/list entry as the test reads it.
type skillEntry struct {
	URI         string            `json:"uri"`
	Frontmatter map[string]string `json:"frontmatter"`
	Resources   []struct {
		URI string `json:"uri"`
	} `json:"resources"`
}

// listedSkills is every page of skills/list.
func listedSkills(t *testing.T, cs *mcp.ClientSession) []skillEntry {
	t.Helper()
	var out []skillEntry
	cursor := ""
	for range 20 {
		m, err := callSkills(t, cs, "skills/list", &skillParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("skills/list: %v", err)
		}
		var page []skillEntry
		if err := json.Unmarshal(m["skills"], &page); err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		cursor = ""
		_ = json.Unmarshal(m["nextCursor"], &cursor)
		if cursor == "" {
			return out
		}
	}
	t.Fatal("skills/list did not end")
	return nil
}

func entryURIs(es []skillEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.URI)
	}
	slices.Sort(out)
	return out
}

func skillText(t *testing.T, cs *mcp.ClientSession, uri string) (string, string, error) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", "", err
	}
	if len(res.Contents) != 1 {
		t.Fatalf("read %s: %d contents", uri, len(res.Contents))
	}
	return res.Contents[0].Text, res.Contents[0].URI, nil
}

func TestSkillsThroughMux(t *testing.T) {
	for _, upEra := range []string{"2025-11-25", "2026-07-28"} {
		m, alpha, beta := skillsMux(t, upEra)
		for _, era := range []string{"2025-11-25", "2026-07-28"} {
			t.Run("upstream "+upEra+"/client "+era, func(t *testing.T) {
				checkSkills(t, m, alpha, beta, era)
			})
		}
	}
}

func checkSkills(t *testing.T, m *mux, alpha, beta *mcptest.SkillsServer, era string) {
	cs := skillsClient(t, m.ts.URL+"/mcp", era)
	ext, ok := cs.InitializeResult().Capabilities.Extensions["io.modelcontextprotocol/skills"].(map[string]any)
	if !ok || ext["directoryRead"] != true {
		t.Fatalf("capabilities do not declare the skills extension with directoryRead: %+v", cs.InitializeResult().Capabilities.Extensions)
	}

	// The merged listing: both servers' skills under their names, the
	// guardrails' hidden skill left out; files under the mux's URIs.
	entries := listedSkills(t, cs)
	want := []string{"skill://alpha/pdf-tools/SKILL.md", "skill://alpha/shared/SKILL.md", "skill://beta/shared/SKILL.md"}
	if got := entryURIs(entries); !slices.Equal(got, want) {
		t.Fatalf("skills/list URIs %v, want %v", got, want)
	}
	for _, e := range entries {
		if e.Frontmatter["name"] != e.URI[strings.LastIndex(strings.TrimSuffix(e.URI, "/SKILL.md"), "/")+1:len(e.URI)-len("/SKILL.md")] {
			t.Errorf("%s: frontmatter name %q is not the final segment", e.URI, e.Frontmatter["name"])
		}
		dir := strings.TrimSuffix(e.URI, "SKILL.md")
		for _, r := range e.Resources {
			if !strings.HasPrefix(r.URI, dir) {
				t.Errorf("%s lists %s outside its directory", e.URI, r.URI)
			}
		}
	}

	// Reads reach the owner with the URI it serves.
	before := alpha.Reads.Load()
	text, uri, err := skillText(t, cs, "skill://beta/shared/SKILL.md")
	if err != nil || !strings.Contains(text, "beta's shared skill") || uri != "skill://beta/shared/SKILL.md" {
		t.Fatalf("read beta's shared: %q %q %v", text, uri, err)
	}
	if got := beta.LastURI.Load(); got != "skill://shared/SKILL.md" {
		t.Errorf("beta was asked for %v, want skill://shared/SKILL.md", got)
	}
	if alpha.Reads.Load() != before {
		t.Errorf("alpha was asked for beta's file")
	}
	if text, _, err := skillText(t, cs, "skill://alpha/pdf-tools/templates/form.md"); err != nil || text != "alpha form" {
		t.Fatalf("read alpha's template: %q %v", text, err)
	}

	// skills/get and directory reads, mapped both ways.
	g, err := callSkills(t, cs, "skills/get", &skillParams{URI: "skill://alpha/shared/SKILL.md"})
	if err != nil {
		t.Fatalf("skills/get: %v", err)
	}
	var got skillEntry
	_ = json.Unmarshal(g["skill"], &got)
	if got.URI != "skill://alpha/shared/SKILL.md" || got.Frontmatter["description"] != "alpha's shared skill" || alpha.LastURI.Load() != "skill://shared/SKILL.md" {
		t.Errorf("skills/get: %+v (alpha asked for %v)", got, alpha.LastURI.Load())
	}
	d, err := callSkills(t, cs, "resources/directory/read", &skillParams{URI: "skill://alpha/pdf-tools"})
	if err != nil {
		t.Fatalf("directory read: %v", err)
	}
	if !strings.Contains(string(d["resources"]), `"skill://alpha/pdf-tools/templates"`) || !strings.Contains(string(d["resources"]), `"inode/directory"`) {
		t.Errorf("directory read children: %s", d["resources"])
	}
	if _, err := callSkills(t, cs, "skills/get", &skillParams{URI: "skill://nobody/x/SKILL.md"}); !isCode(err, jsonrpc.CodeInvalidParams) {
		t.Errorf("skills/get of an unserved URI: %v, want -32602", err)
	}

	// The guardrails' hidden skill is neither got nor read.
	n := beta.Reads.Load()
	if _, err := callSkills(t, cs, "skills/get", &skillParams{URI: "skill://beta/code-review/SKILL.md"}); !isCode(err, jsonrpc.CodeInvalidParams) {
		t.Errorf("skills/get of a hidden skill: %v, want -32602", err)
	}
	if _, _, err := skillText(t, cs, "skill://beta/code-review/SKILL.md"); err == nil {
		t.Errorf("read of a hidden skill succeeded")
	}
	for _, uri := range []string{"skill://code-review/SKILL.md", "skill://beta/shared/../code-review/SKILL.md"} {
		if text, _, err := skillText(t, cs, uri); err == nil {
			t.Errorf("read %s around the mapping: %q", uri, text)
		}
	}
	if beta.Reads.Load() != n {
		t.Errorf("a hidden skill's request reached beta")
	}

	// Profile a has no beta: its skills are neither listed nor read.
	pa := skillsClient(t, m.ts.URL+"/mcp/a", era)
	if got := entryURIs(listedSkills(t, pa)); !slices.Equal(got, want[:2]) {
		t.Errorf("profile a lists %v, want %v", got, want[:2])
	}
	if _, _, err := skillText(t, pa, "skill://beta/shared/SKILL.md"); err == nil {
		t.Errorf("profile a read beta's skill")
	}
	if _, err := callSkills(t, pa, "skills/get", &skillParams{URI: "skill://beta/shared/SKILL.md"}); err == nil {
		t.Errorf("profile a got beta's skill")
	}
	if beta.Reads.Load() != n {
		t.Errorf("profile a's requests reached beta")
	}
}

// isCode reports whether err is a JSON-RPC error with code.
func isCode(err error, code int64) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == code
}

// TestSkillsVerbatimCollision: two servers that keep their URIs both serve
// skill://shared/SKILL.md; the first in config order keeps it, in the
// listing and for reads, as tools' collisions are resolved.
func TestSkillsVerbatimCollision(t *testing.T) {
	alpha, beta := skillServers()
	ua, ub := mcptest.ServeHTTPBothEras(t, alpha.Server), mcptest.ServeHTTPBothEras(t, beta.Server)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {
	    "alpha": {"type": "http", "url": %q, "tool_name_prefix": false},
	    "beta": {"type": "http", "url": %q, "tool_name_prefix": false}}}`, ua.URL+"/mcp", ub.URL+"/mcp"), proxy.Options{})
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		cs := skillsClient(t, m.ts.URL+"/mcp", era)
		entries := listedSkills(t, cs)
		want := []string{"skill://code-review/SKILL.md", "skill://pdf-tools/SKILL.md", "skill://shared/SKILL.md"}
		if got := entryURIs(entries); !slices.Equal(got, want) {
			t.Fatalf("%s: skills/list %v, want %v", era, got, want)
		}
		for _, e := range entries {
			if e.URI == "skill://shared/SKILL.md" && e.Frontmatter["description"] != "alpha's shared skill" {
				t.Errorf("%s: the shared skill is %q, want alpha's", era, e.Frontmatter["description"])
			}
		}
		n := beta.Reads.Load()
		if text, _, err := skillText(t, cs, "skill://shared/SKILL.md"); err != nil || !strings.Contains(text, "alpha's shared skill") {
			t.Errorf("%s: read of the shared skill: %q %v", era, text, err)
		}
		if text, _, err := skillText(t, cs, "skill://code-review/SKILL.md"); err != nil || !strings.Contains(text, "beta reviews code") {
			t.Errorf("%s: read of beta's own skill: %q %v", era, text, err)
		}
		if beta.Reads.Load() != n+1 {
			t.Errorf("%s: beta read %d times, want 1", era, beta.Reads.Load()-n)
		}
	}
}
