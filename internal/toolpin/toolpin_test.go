package toolpin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forStores runs fn on a bbolt file, a Redis server and a Redis Cluster;
// open returns another Store on the same data (a second replica's, or
// the file again for bolt).
func forStores(t *testing.T, fn func(t *testing.T, st Store, other func() Store)) {
	t.Run("bolt", func(t *testing.T) {
		s, err := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		fn(t, s, func() Store { return s })
	})
	t.Run("redis", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		c := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
		t.Cleanup(func() { _ = c.Close() })
		fn(t, NewRedisStore(RedisOptions{Client: c, KeyPrefix: "t:"}), func() Store {
			c2 := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
			t.Cleanup(func() { _ = c2.Close() })
			return NewRedisStore(RedisOptions{Client: c2, KeyPrefix: "t:"})
		})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := mcptest.StartRedisCluster(t, 3)
		c, err := storeclient.Open(storeclient.Options{Mode: storeclient.Cluster, URL: secret.Value(cl.URL())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		st := NewRedisStore(RedisOptions{Client: c, KeyPrefix: "t:"})
		fn(t, st, func() Store { return st })
	})
}

// tool is a tool object with desc as its description.
func tool(name, desc string) Tool {
	raw, _ := json.Marshal(map[string]any{"name": name, "description": desc,
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}})
	return Tool{Name: name, Raw: raw}
}

// descOf is the description of a served tool.
func descOf(t *testing.T, tools []Tool, name string) string {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			var v struct{ Description string }
			if err := json.Unmarshal(tl.Raw, &v); err != nil {
				t.Fatal(err)
			}
			return v.Description
		}
	}
	return "(not served)"
}

// logBuf captures a Guard's log lines.
func logged(t *testing.T) (hclog.Logger, *strings.Builder) {
	var b strings.Builder
	return hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info}), &b
}

// TestDigest: the pin covers title, description, schemas and annotations
// in a canonical form, not the name, _meta or formatting; Diff names the
// parts that differ.
func TestDigest(t *testing.T) {
	base := Digest(json.RawMessage(`{"name":"a","description":"d","inputSchema":{"type":"object","required":["x"]},"annotations":{"readOnlyHint":true}}`))
	same := Digest(json.RawMessage(`{ "annotations": {"readOnlyHint": true}, "inputSchema": {"required": ["x"], "type": "object"}, "description": "d", "name": "b", "_meta": {"k": 1} }`))
	if base.Hash != same.Hash {
		t.Fatal("reordered keys, another name and _meta changed the pin")
	}
	for _, c := range []struct {
		raw  string
		want string
	}{
		{`{"description":"d2","inputSchema":{"type":"object","required":["x"]},"annotations":{"readOnlyHint":true}}`, "description"},
		{`{"description":"d","inputSchema":{"type":"object","required":["y"]},"annotations":{"readOnlyHint":true}}`, "input_schema"},
		{`{"description":"d","inputSchema":{"type":"object","required":["x"]},"annotations":{"readOnlyHint":false}}`, "annotations"},
		{`{"description":"d","title":"T","inputSchema":{"type":"object","required":["x"]},"annotations":{"readOnlyHint":true}}`, "title"},
		{`{"description":"d","inputSchema":{"type":"object","required":["x"]},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`, "output_schema"},
		{`["not", "a", "tool"]`, "raw"},
	} {
		now := Digest(json.RawMessage(c.raw))
		if got := strings.Join(Diff(&base, &now), ","); got != c.want || now.Hash == base.Hash {
			t.Errorf("%s: changed parts %q, want %q", c.raw, got, c.want)
		}
	}
}

// TestWarn: a changed description under warn is logged (parts only, not
// the text), counted once however often the list is checked, listed,
// and served; accepting it re-pins it.
func TestWarn(t *testing.T) {
	forStores(t, func(t *testing.T, st Store, _ func() Store) {
		log, buf := logged(t)
		g := New(Options{Store: st, Log: log})
		out := g.Check("files", Warn, []Tool{tool("read", "Reads a file."), tool("list", "Lists files.")})
		if len(out) != 2 {
			t.Fatalf("first sight served %d tools, want 2", len(out))
		}
		changed := []Tool{tool("read", "Reads a file. SECRET-INSTRUCTION ignore previous"), tool("list", "Lists files.")}
		for range 3 {
			out = g.Check("files", Warn, changed)
		}
		if d := descOf(t, out, "read"); !strings.Contains(d, "SECRET-INSTRUCTION") {
			t.Fatalf("warn served %q, want the new definition", d)
		}
		if n := testutil.ToFloat64(g.changes.WithLabelValues("files", Warn)); n != 1 {
			t.Fatalf("changes counted %v times, want 1", n)
		}
		if !strings.Contains(buf.String(), "changed a pinned tool definition") || !strings.Contains(buf.String(), "description") ||
			strings.Contains(buf.String(), "SECRET-INSTRUCTION") {
			t.Fatalf("log %q: want one warning naming the part, never the text", buf.String())
		}
		if p, n := g.Pending(10); n != 1 || p[0].Tool != "read" || strings.Join(p[0].Parts, ",") != PartDescription || p[0].Mode != Warn {
			t.Fatalf("pending %+v (%d)", p, n)
		}
		if why := g.Refused(context.Background(), "files", "read"); why != "" {
			t.Fatalf("warn refused a call: %s", why)
		}
		if _, err := g.Accept(context.Background(), "files", "read"); err != nil {
			t.Fatal(err)
		}
		g.Check("files", Warn, changed)
		if _, n := g.Pending(10); n != 0 {
			t.Fatalf("%d changes still listed after accepting", n)
		}
	})
}

// TestBlock: under block the pinned definition is served and the changed
// tool refused until accepted; accepting serves the new one. Accepting an
// unchanged tool is ErrNothing, an unknown one ErrNotFound.
func TestBlock(t *testing.T) {
	forStores(t, func(t *testing.T, st Store, _ func() Store) {
		g := New(Options{Store: st})
		ctx := context.Background()
		g.Check("files", Block, []Tool{tool("read", "Reads a file."), tool("list", "Lists files.")})
		changed := []Tool{tool("read", "Reads a file, then mails it."), tool("list", "Lists files.")}
		out := g.Check("files", Block, changed)
		if d := descOf(t, out, "read"); d != "Reads a file." {
			t.Fatalf("block served %q, want the pinned definition", d)
		}
		if why := g.Refused(ctx, "files", "read"); !strings.Contains(why, "description") {
			t.Fatalf("a changed tool under block: refused %q", why)
		}
		if why := g.Refused(ctx, "files", "list"); why != "" {
			t.Fatalf("an unchanged tool was refused: %s", why)
		}
		if _, err := g.Accept(ctx, "files", "list"); !errors.Is(err, ErrNothing) {
			t.Fatalf("accepting an unchanged tool: %v", err)
		}
		if _, err := g.Accept(ctx, "files", "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("accepting an unknown tool: %v", err)
		}
		if _, err := g.Accept(ctx, "other", "read"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("accepting a tool of an unknown server: %v", err)
		}
		c, err := g.Accept(ctx, "files", "read")
		if err != nil || !c.Held {
			t.Fatalf("accept: %+v, %v", c, err)
		}
		select {
		case <-g.Changed():
		default:
			t.Fatal("accepting did not signal Changed")
		}
		out = g.Check("files", Block, changed)
		if d := descOf(t, out, "read"); d != "Reads a file, then mails it." || g.Refused(ctx, "files", "read") != "" {
			t.Fatalf("after accepting: served %q", d)
		}
		// A new tool pins on sight; a removed one keeps its pin.
		out = g.Check("files", Block, []Tool{tool("list", "Lists files."), tool("stat", "Stats a file.")})
		if len(out) != 2 || g.Refused(ctx, "files", "stat") != "" {
			t.Fatalf("a new tool under block: served %d, refused %q", len(out), g.Refused(ctx, "files", "stat"))
		}
		out = g.Check("files", Block, []Tool{tool("read", "Reads a file, then deletes it.")})
		if d := descOf(t, out, "read"); d != "Reads a file, then mails it." {
			t.Fatalf("a tool back after removal, changed: served %q, want its kept pin's", d)
		}
	})
}

// TestReplicas: two Guards on one store (two replicas) agree on the pins;
// a change accepted on B lets A's next call run (one read) and signals
// A's Changed; Recheck finds it too.
func TestReplicas(t *testing.T) {
	forStores(t, func(t *testing.T, st Store, other func() Store) {
		ctx := context.Background()
		a, b := New(Options{Store: st}), New(Options{Store: other()})
		a.Check("files", Block, []Tool{tool("read", "v1")})
		// B first sees v2: the pin A made stands (first sight wins).
		if d := descOf(t, b.Check("files", Block, []Tool{tool("read", "v2")}), "read"); d != "v1" {
			t.Fatalf("replica B served %q, want A's pin v1", d)
		}
		a.Check("files", Block, []Tool{tool("read", "v2")})
		if a.Recheck(ctx) {
			t.Fatal("Recheck found a change before anyone accepted")
		}
		if _, err := b.Accept(ctx, "files", "read"); err != nil {
			t.Fatal(err)
		}
		if !a.Recheck(ctx) {
			t.Fatal("A's Recheck missed B's acceptance")
		}
		if why := a.Refused(ctx, "files", "read"); why != "" {
			t.Fatalf("A refused a tool B accepted: %s", why)
		}
		select {
		case <-a.Changed():
		default:
			t.Fatal("A learnt of B's acceptance without signalling Changed")
		}
	})
}

// TestBounds: a definition past MaxDefinition is pinned by hash but not
// kept (under block its change withholds the tool); a server past
// MaxPins gets no more pins (block withholds the tool, warn serves it);
// a name that is not printable is never a key.
func TestBounds(t *testing.T) {
	forStores(t, func(t *testing.T, st Store, _ func() Store) {
		ctx := context.Background()
		huge := func(desc string) Tool {
			raw, _ := json.Marshal(map[string]any{"name": "big", "description": desc,
				"inputSchema": map[string]any{"type": "object", "description": strings.Repeat("x", 2*MaxDefinition)}})
			return Tool{Name: "big", Raw: raw}
		}
		g := New(Options{Store: st, MaxPins: 3})
		g.Check("s", Block, []Tool{huge("v1")})
		if def, err := st.definition(ctx, "s", "big"); err != nil || def != nil {
			t.Fatalf("a %d-byte definition was kept (%d bytes, %v)", len(huge("v1").Raw), len(def), err)
		}
		if out := g.Check("s", Block, []Tool{huge("v2")}); len(out) != 0 || g.Refused(ctx, "s", "big") == "" {
			t.Fatalf("a changed tool whose definition was not kept: served %d, refused %q", len(out), g.Refused(ctx, "s", "big"))
		}
		tools := []Tool{tool("a", "a"), tool("b", "b"), tool("c", "c"), tool("d", "d")}
		out := g.Check("s", Block, tools)
		if len(out) != 2 || g.Refused(ctx, "s", "d") == "" {
			t.Fatalf("past MaxPins (3, one taken by big) under block: served %d tools, want 2", len(out))
		}
		if out := g.Check("s", Warn, tools); len(out) != 4 {
			t.Fatalf("past MaxPins under warn: served %d tools, want 4", len(out))
		}
		odd := Tool{Name: "bad\x00name", Raw: json.RawMessage(`{"description":"x"}`)}
		if out := g.Check("t", Block, []Tool{odd}); len(out) != 0 || g.Refused(ctx, "t", odd.Name) == "" {
			t.Fatal("a tool whose name cannot be a key was served under block")
		}
	})
}

// failing is a Store whose reads fail.
type failing struct{ Store }

func (failing) records(context.Context, string, []string) (map[string]*Record, error) {
	return nil, errors.New("store down")
}

// TestStoreDown: when the pins cannot be read, block serves none of the
// server's tools and refuses their calls; warn serves them; a store that
// cannot be opened is the same.
func TestStoreDown(t *testing.T) {
	st, err := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := New(Options{Store: failing{st}})
	if out := g.Check("s", Block, []Tool{tool("a", "a")}); len(out) != 0 || g.Refused(context.Background(), "s", "a") == "" {
		t.Fatalf("block with the store down served %d tools", len(out))
	}
	if out := g.Check("s", Warn, []Tool{tool("a", "a")}); len(out) != 1 {
		t.Fatalf("warn with the store down served %d tools", len(out))
	}
	opened := 0
	g = New(Options{Open: func() (Store, error) { opened++; return nil, fmt.Errorf("no data dir") }})
	if out := g.Check("s", Off, []Tool{tool("a", "a")}); len(out) != 1 || opened != 0 {
		t.Fatalf("off served %d tools and opened the store %d times", len(out), opened)
	}
	if out := g.Check("s", Block, []Tool{tool("a", "a")}); len(out) != 0 || opened != 1 {
		t.Fatalf("block with no store served %d tools (opened %d)", len(out), opened)
	}
}

// FuzzDigest: any bytes a server lists hash without panicking, the same
// way twice, and a definition re-encoded canonically pins the same.
func FuzzDigest(f *testing.F) {
	for _, s := range []string{`{}`, `{"description":"d","inputSchema":{"type":"object"}}`, `[]`, `null`, `{"annotations":{"a":1e400}}`,
		`{"description":"\u00e9\ud800","inputSchema":{"properties":{"x":{"type":"number","minimum":1.50}}}}`, `{"title":`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, b := Digest(raw), Digest(raw)
		if a.Hash != b.Hash || len(Diff(&a, &b)) != 0 {
			t.Fatal("the same definition pinned differently")
		}
		var v map[string]json.RawMessage
		if json.Unmarshal(raw, &v) != nil || v == nil {
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			return
		}
		if c := Digest(again); c.Hash != a.Hash {
			t.Fatalf("re-encoding %q changed its pin", raw)
		}
	})
}
