package doctest

import (
	"slices"
	"testing"
)

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Quick start":                        "quick-start",
		"`mcpServers.<name>`":                "mcpserversname",
		"`tools.<raw tool>`":                 "toolsraw-tool",
		"`telemetry` (per server)":           "telemetry-per-server",
		"Routing hints and tool_search":      "routing-hints-and-tool_search",
		"The tasks extension (2026-07-28)":   "the-tasks-extension-2026-07-28",
		"Telemetry's cost":                   "telemetrys-cost",
		"Replicas, load balancers — and K8s": "replicas-load-balancers--and-k8s",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStripLineComments(t *testing.T) {
	in := "{\"a\": \"http://x//y\", // a comment\n  \"b\": \"\\\"//\" // another\n}\n// trailing\n"
	want := "{\"a\": \"http://x//y\",\n  \"b\": \"\\\"//\"\n}\n\n"
	if got := StripLineComments(in); got != want {
		t.Errorf("StripLineComments:\n got %q\nwant %q", got, want)
	}
}

func TestPageParts(t *testing.T) {
	p := Page{Path: "docs/x.md", Text: "# Title\n\n## A `b` c\n\nSee [x](y.md#z) and `[not](a link)`.\n\n" +
		"<!-- fragment: an excerpt -->\n```json\n{\"k\": 1}\n```\n\n| a | b \\| c |\n|---|---|\n| `d` | e |\n\n## A `b` c\n"}
	var anchors []string
	for _, h := range p.Headings() {
		anchors = append(anchors, h.Anchor)
	}
	if want := []string{"title", "a-b-c", "a-b-c-1"}; !slices.Equal(anchors, want) {
		t.Errorf("anchors %q, want %q", anchors, want)
	}
	if l := p.Links(); len(l) != 1 || l[0].Target != "y.md#z" || l[0].Line != 5 {
		t.Errorf("links %+v", l)
	}
	b := p.Blocks()
	if len(b) != 1 || b[0].Lang != "json" || b[0].Marker != "fragment" || b[0].MarkerText != "an excerpt" || b[0].Body != "{\"k\": 1}\n" || b[0].Line != 8 {
		t.Errorf("blocks %+v", b)
	}
	r := p.Rows()
	if len(r) != 2 || !slices.Equal(r[0].Cells, []string{"a", `b \| c`}) || !slices.Equal(r[1].Cells, []string{"`d`", "e"}) {
		t.Errorf("rows %+v", r)
	}
}
