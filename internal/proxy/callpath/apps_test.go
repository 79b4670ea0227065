package callpath

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// appsCatalog is a catalog of one server that declares MCP Apps.
func appsCatalog() *Catalog {
	caps := &mcp.ServerCapabilities{}
	caps.AddExtension(catalog.UIExtension, nil)
	src := []catalog.Source[*Backend]{{Server: &Backend{Name: "s"}, Name: "s", Lists: upstream.Lists{Capabilities: caps}}}
	return catalog.Build(src, NewCatalogPolicy(&config.Config{}, false), hclog.NewNullLogger())
}

// TestAppsStageFollowsTheCatalog: the pipeline has the apps stage while
// the runtime's catalog has an app server, and is assembled again when
// that changes.
func TestAppsStageFollowsTheCatalog(t *testing.T) {
	s := testRouter(t, Options{})
	rt := s.rt.Load()
	rt.Catalog.Store(catalog.Build[*Backend](nil, NewCatalogPolicy(&config.Config{}, false), hclog.NewNullLogger()))
	c := testCall()
	c.Method, c.Name, c.Params, c.Route = "resources/read", "ui://s/x", &mcp.ReadResourceParams{URI: "ui://s/x"}, nil
	_, _ = s.Run(context.Background(), c)
	if p := rt.pipeline.Load(); p == nil || p.apps {
		t.Fatalf("pipeline %+v, want one without apps", p)
	}
	first := rt.pipeline.Load()
	rt.Catalog.Store(appsCatalog())
	_, _ = s.Run(context.Background(), testCall())
	if p := rt.pipeline.Load(); p == first || !p.apps {
		t.Errorf("the pipeline was not assembled again with apps: %+v", p)
	}
}

// TestAppsStage: a resources/read of a listed ui:// URI goes upstream with
// the server's own URI, and the ui:// URIs of what comes back carry the
// server's segment; other URIs pass unchanged both ways.
func TestAppsStage(t *testing.T) {
	s := testRouter(t, Options{})
	var sent []string
	next := func(_ context.Context, c *Call) (json.RawMessage, error) {
		if p, ok := c.Params.(*mcp.ReadResourceParams); ok {
			sent = append(sent, p.URI)
			return json.RawMessage(`{"contents":[{"uri":"` + p.URI + `","text":"x"}]}`), nil
		}
		return json.RawMessage(`{"content":[{"type":"resource_link","uri":"ui://d","name":"d"},{"type":"resource","resource":{"uri":"ui://d","text":"y"}},{"type":"text","text":"ui://d"}]}`), nil
	}
	run := appsStage(s).Wrap(next)
	for uri, want := range map[string]string{
		"ui://s/dash":   `{"contents":[{"text":"x","uri":"ui://s/dash"}]}`,
		"file:///a.txt": `{"contents":[{"uri":"file:///a.txt","text":"x"}]}`,
	} {
		sent = sent[:0]
		c := testCall()
		params := &mcp.ReadResourceParams{URI: uri}
		c.Method, c.Name, c.Params = "resources/read", uri, params
		res, err := run(context.Background(), c)
		if err != nil || string(res) != want {
			t.Errorf("read %s: %s %v, want %s", uri, res, err, want)
		}
		if own := map[string]string{"ui://s/dash": "ui://dash"}[uri]; len(sent) != 1 || (own != "" && sent[0] != own) || (own == "" && sent[0] != uri) {
			t.Errorf("read %s sent %v upstream", uri, sent)
		}
		if params.URI != uri || c.Name != uri {
			t.Errorf("the caller's params or name changed: %q %q", params.URI, c.Name)
		}
	}
	res, err := run(context.Background(), testCall())
	want := `{"content":[{"name":"d","type":"resource_link","uri":"ui://s/d"},{"resource":{"text":"y","uri":"ui://s/d"},"type":"resource"},{"type":"text","text":"ui://d"}]}`
	if err != nil || string(res) != want {
		t.Errorf("tool result %s %v, want %s", res, err, want)
	}
}
