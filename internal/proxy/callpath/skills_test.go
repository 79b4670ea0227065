package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
)

// skillsView is a view of two prefixed skill servers, alpha and beta,
// with the guardrails denying skill:alpha_secret.
func skillsView() (*Catalog, *Backend, *Backend) {
	alpha, beta := &Backend{Name: "alpha", Prefix: true}, &Backend{Name: "beta", Prefix: true}
	var src []catalog.Source[*Backend]
	for _, b := range []*Backend{alpha, beta} {
		caps := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{}}
		caps.AddExtension(catalog.SkillsExtension, nil)
		s := catalog.Source[*Backend]{Server: b, Name: b.Name, Prefix: true, Config: &config.Server{Name: b.Name}}
		s.Lists.Capabilities = caps
		src = append(src, s)
	}
	pol := catalog.NewPolicy(catalog.Options{Guardrails: config.Guardrails{Enabled: true, DeniedTools: []string{"skill:alpha_secret"}}})
	return catalog.Build(src, pol, hclog.NewNullLogger()), alpha, beta
}

// skillCall is a Call of method at b in view, naming uri.
func skillCall(view *Catalog, b *Backend, method, uri string) *Call {
	c := &Call{Method: method, View: view, Backend: b, Name: uri}
	if method == "resources/read" {
		c.Params = &mcp.ReadResourceParams{URI: uri}
	} else {
		c.Params = &skillParams{URI: uri}
	}
	return c
}

// TestSkillsStage: a skill request reaches its server with the server's
// URI and its result comes back with the mux's, however the call ends;
// a hidden skill, or a read around the mapping, never reaches next;
// other reads pass untouched.
func TestSkillsStage(t *testing.T) {
	view, alpha, beta := skillsView()
	st := skillsStage(nil)
	if st.Methods&ToolCall != 0 {
		t.Fatalf("the skills stage is on the tools/call chain")
	}
	for _, e := range endings {
		c := skillCall(view, alpha, "resources/read", "skill://alpha/pdf/SKILL.md")
		var sent string
		e := e
		run := e.run
		e.run = func(ctx context.Context, c *Call) (json.RawMessage, error) {
			sent = skillURIOf(c.Params)
			if e.name == "success" {
				return json.RawMessage(`{"contents":[{"uri":"skill://pdf/SKILL.md","text":"x"}]}`), nil
			}
			return run(ctx, c)
		}
		raw, err := runEnding(t, st, e, c)
		if sent != "skill://pdf/SKILL.md" {
			t.Errorf("%s: next was sent %q", e.name, sent)
		}
		switch {
		case e.name == "success" && (err != nil || !strings.Contains(string(raw), `"uri":"skill://alpha/pdf/SKILL.md"`)):
			t.Errorf("%s: %s %v", e.name, raw, err)
		case e.name != "success" && err == nil:
			t.Errorf("%s: the stage swallowed the error", e.name)
		}
	}

	// Requests that must not reach next.
	refused := []struct {
		method, uri string
		b           *Backend
		code        int64
	}{
		{"resources/read", "skill://alpha/secret/SKILL.md", alpha, -32002},
		{"resources/read", "skill://secret/SKILL.md", alpha, -32002},   // around the mapping
		{"resources/read", "skill://beta/x/SKILL.md", alpha, -32002},   // another server's
		{"skills/get", "skill://alpha/secret/SKILL.md", alpha, -32602}, // hidden
		{"skills/get", "skill://nobody/x/SKILL.md", alpha, -32602},
		{"resources/directory/read", "skill://alpha/a/../secret", alpha, -32602},
	}
	for _, r := range refused {
		called := false
		_, err := st.Wrap(func(context.Context, *Call) (json.RawMessage, error) { called = true; return nil, nil })(t.Context(), skillCall(view, r.b, r.method, r.uri))
		var je *jsonrpc.Error
		if called || !errors.As(err, &je) || je.Code != r.code {
			t.Errorf("%s %s: reached next %v, err %v, want %d", r.method, r.uri, called, err, r.code)
		}
	}

	// Another scheme passes untouched.
	c := skillCall(view, beta, "resources/read", "res://beta/doc")
	p := c.Params
	if _, err := st.Wrap(func(_ context.Context, c *Call) (json.RawMessage, error) {
		if c.Params != p {
			t.Errorf("params of a non-skill read changed")
		}
		return json.RawMessage(`{"contents":[]}`), nil
	})(t.Context(), c); err != nil {
		t.Fatal(err)
	}
}

// TestSkillsStageList: a server's skills/list page comes back under the
// mux's URIs, without hidden skills or entries past the file limit.
func TestSkillsStageList(t *testing.T) {
	view, alpha, _ := skillsView()
	entry := func(name string, files int) string {
		res := []string{fmt.Sprintf(`{"uri":"skill://%s/SKILL.md","digest":"sha256:00","size":1}`, name)}
		for i := 1; i < files; i++ {
			res = append(res, fmt.Sprintf(`{"uri":"skill://%s/f%d","digest":"sha256:00","size":1}`, name, i))
		}
		return fmt.Sprintf(`{"uri":"skill://%s/SKILL.md","frontmatter":{"name":%q},"resources":[%s]}`, name, name, strings.Join(res, ","))
	}
	page := `{"skills":[` + strings.Join([]string{entry("pdf", 2), entry("secret", 1), entry("huge", maxSkillResources+1),
		`{"uri":"skill://dyn/SKILL.md","frontmatter":{"name":"dyn"},"resources":"dynamic"}`}, ",") + `],"nextCursor":"c2"}`
	c := &Call{Method: "skills/list", View: view, Backend: alpha, Params: &skillParams{}}
	raw, err := skillsStage(nil).Wrap(func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(page), nil })(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Skills []struct {
			URI       string          `json:"uri"`
			Resources json.RawMessage `json:"resources"`
		} `json:"skills"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, s := range got.Skills {
		uris = append(uris, s.URI)
	}
	if strings.Join(uris, " ") != "skill://alpha/pdf/SKILL.md skill://alpha/dyn/SKILL.md" || got.NextCursor != "c2" {
		t.Fatalf("page: %s", raw)
	}
	if !strings.Contains(string(got.Skills[0].Resources), `"skill://alpha/pdf/f1"`) || string(got.Skills[1].Resources) != `"dynamic"` {
		t.Errorf("resources: %s / %s", got.Skills[0].Resources, got.Skills[1].Resources)
	}
}

// FuzzSkillResult: the result rewriting takes any bytes a server sends
// without panicking, and what it returns is JSON.
func FuzzSkillResult(f *testing.F) {
	for _, s := range []string{`{"skills":[{"uri":"skill://a/SKILL.md","resources":[{"uri":"skill://a/x"}]}]}`,
		`{"skill":{"uri":"skill://a/SKILL.md","resources":"dynamic"}}`, `{"resources":[{"uri":"skill://a/b","mimeType":"inode/directory"},1,null]}`,
		`{"contents":[{"uri":"skill://a/SKILL.md","text":"t"}]}`, `[]`, `null`, `{"skills":{}}`, `{"skill":[]}`} {
		f.Add(s)
	}
	view, alpha, _ := skillsView()
	k := view.Skills()
	sv, _ := skillServerOf(k, alpha)
	f.Fuzz(func(t *testing.T, raw string) {
		check := func(out json.RawMessage, err error) {
			if err == nil && !json.Valid(out) {
				t.Fatalf("rewrote %q into invalid JSON %q", raw, out)
			}
		}
		check(rewriteSkillList(json.RawMessage(raw), k, sv))
		for _, m := range skillMethods[1:] {
			check(rewriteSkillResult(m, json.RawMessage(raw), k, sv))
		}
		check(rewriteSkillResult("resources/read", json.RawMessage(raw), k, sv))
	})
}
