package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// TestAppURIForms: the documented forms of a listed ui:// URI, and back.
func TestAppURIForms(t *testing.T) {
	for _, tc := range []struct{ server, uri, listed string }{
		{"a", "ui://dashboard", "ui://a/dashboard"},
		{"a", "ui://host/path", "ui://a/host/path"},
		{"a", "ui://host/path?x=1#f", "ui://a/host/path?x=1#f"},
		{"a", "ui://", "ui://a/"},
		{"a", "https://host/path", "https://host/path"},  // not ui://: unchanged
		{"a", "UI://dashboard", "UI://dashboard"},        // the extension's scheme is lower case
		{"bad name", "ui://dashboard", "ui://dashboard"}, // a name that is no segment: unchanged
	} {
		if got := catalog.AppURI(tc.server, tc.uri); got != tc.listed {
			t.Errorf("AppURI(%q, %q) = %q, want %q", tc.server, tc.uri, got, tc.listed)
		}
		server, own, ok := catalog.ServerURI(tc.listed)
		if rewritten := tc.listed != tc.uri; ok != rewritten || (ok && (server != tc.server || own != tc.uri)) {
			t.Errorf("ServerURI(%q) = %q %q %v", tc.listed, server, own, ok)
		}
	}
}

// appSource is a backend whose tool "show" has the UI ui://dashboard and
// whose other tools are named by raws.
func appSource(name string, prefix bool, raws ...string) srv {
	s := source(name, prefix, raws...)
	raw, _ := json.Marshal(map[string]any{"name": "show", "inputSchema": map[string]any{"type": "object"},
		"_meta": map[string]any{"ui": map[string]any{"resourceUri": "ui://dashboard", "visibility": []string{"model", "app"}}, "ui/resourceUri": "ui://dashboard"}})
	s.Lists.Tools = append(s.Lists.Tools, upstream.Tool{Name: "show", Raw: raw})
	s.Lists.Resources = append(s.Lists.Resources, upstream.Item{Key: "ui://dashboard", Raw: json.RawMessage(`{"uri":"ui://dashboard","name":"d"}`)})
	return s
}

// TestAppsCatalog: links, resources and raw names in the full catalog and
// a profile's view; a tool_name_prefix false server still gets its
// segment; a server that serves no app offers no raw names.
func TestAppsCatalog(t *testing.T) {
	plain := source("plain", true, "refresh", "solo")
	c := build([]srv{appSource("a", true, "refresh", "zoom"), appSource("b", false, "refresh"), plain}, catalog.Options{})
	var tl struct {
		Tools []struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(c.ListJSON(), &tl); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{}
	for _, x := range tl.Tools {
		if ui, ok := x.Meta["ui"].(map[string]any); ok {
			links[x.Name] = ui["resourceUri"].(string) + " " + x.Meta["ui/resourceUri"].(string)
		}
	}
	if want := "map[a_show:ui://a/dashboard ui://a/dashboard show:ui://b/dashboard ui://b/dashboard]"; fmtMap(links) != want {
		t.Errorf("links %v, want %s", links, want)
	}
	if got := string(c.Resources()[1]); !strings.Contains(got, `"uri":"ui://b/dashboard"`) {
		t.Errorf("b's resource %s", got)
	}
	for uri, want := range map[string]string{"ui://a/dashboard": "a", "ui://b/x": "b", "ui://plain/x": "plain", "ui://dashboard": "", "ui://zz/x": ""} {
		if got := c.ResourceOwner(uri); got != want {
			t.Errorf("owner of %s = %q, want %q", uri, got, want)
		}
	}
	if _, ok := c.Capabilities().Extensions[catalog.UIExtension]; !ok {
		t.Error("the extension is not advertised")
	}
	for name, want := range map[string]string{"zoom": "a_zoom", "solo": "", "refresh": "", "nothing": ""} {
		r, _ := c.ResolveRaw(name, "")
		if got := ""; r != nil {
			got = r.Name
			if got != want {
				t.Errorf("raw %s = %s, want %s", name, got, want)
			}
		} else if want != "" {
			t.Errorf("raw %s resolved to nothing, want %s", name, want)
		}
	}
	if r, cands := c.ResolveRaw("refresh", ""); r != nil || strings.Join(cands, " ") != "a_refresh refresh" {
		t.Errorf("ambiguous refresh: %v %v", r, cands)
	}
	if r, _ := c.ResolveRaw("refresh", "ui://b/dashboard"); r == nil || r.Name != "refresh" || r.Server != "b" {
		t.Errorf("refresh from b's app: %+v", r)
	}
	if r, _ := c.ResolveRaw("refresh", "ui://plain/x"); r != nil {
		t.Errorf("refresh from a non-app server's URI: %+v", r)
	}
	if build([]srv{plain}, catalog.Options{}).Apps() {
		t.Error("a catalog with no app server has apps")
	}
}

// fmtMap is a map's sorted fmt form.
func fmtMap(m map[string]string) string {
	b, _ := json.Marshal(m)
	s := strings.NewReplacer(`{`, "map[", `}`, "]", `","`, " ", `":"`, ":", `"`, "").Replace(string(b))
	return s
}

// FuzzAppURI: arbitrary servers, URIs and JSON never panic; a ui:// URI of
// a server with a valid name comes back as it was; a result stays JSON.
func FuzzAppURI(f *testing.F) {
	f.Add("a", "ui://dashboard", `{"contents":[{"uri":"ui://x"}]}`)
	f.Add("srv_1", "ui://host/path?q#f", `{"content":[{"type":"resource_link","uri":"ui://a"},{"type":"resource","resource":{"uri":"ui://b"}}]}`)
	f.Add("a/b", "ui:///", `{"_meta":{"ui":{"resourceUri":"ui://d"},"ui/resourceUri":"ui://d"}}`)
	f.Add("", "ui:", `{"content":"ui:"}`)
	f.Add("x", "file://ui://", `[1,"ui://"]`)
	f.Fuzz(func(t *testing.T, server, uri, raw string) {
		listed := catalog.AppURI(server, uri)
		s, own, ok := catalog.ServerURI(listed)
		if listed != uri && (!ok || s != server || own != uri) {
			t.Fatalf("AppURI(%q, %q) = %q, back %q %q %v", server, uri, listed, s, own, ok)
		}
		if ok && catalog.OwnURI(listed) != own {
			t.Fatalf("OwnURI(%q) = %q, want %q", listed, catalog.OwnURI(listed), own)
		}
		out := catalog.AppResult(json.RawMessage(raw), server)
		if json.Valid([]byte(raw)) && !json.Valid(out) {
			t.Fatalf("AppResult(%s) = %s, not JSON", raw, out)
		}
		meta, origin := catalog.AppOrigin(json.RawMessage(raw))
		if origin != "" && !strings.HasPrefix(origin, "ui://") {
			t.Fatalf("origin %q", origin)
		}
		if json.Valid([]byte(raw)) && meta != nil && !json.Valid(meta) {
			t.Fatalf("AppOrigin(%s) = %s", raw, meta)
		}
	})
}
