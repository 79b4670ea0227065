package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// Profiles: alice's api key maps to profile a (server alpha, without its
// sleep tool), bob's to profile b (server beta, only beta_echo and
// beta_add); carol's key maps to none, so she sees every tool and may
// pick a profile by path.
const (
	profileA = "alpha_add alpha_count alpha_echo alpha_elicit alpha_fail alpha_headers alpha_log alpha_pid alpha_progress alpha_sample alpha_version"
	profileB = "beta_add beta_echo beta_elicit"
)

// profileMux starts a mux with the two profiles; extra is appended to the
// top-level object.
func profileMux(t *testing.T, extra string) *mux {
	t.Helper()
	m, _ := startMuxEnv(t, profileConfig(t, extra), map[string]string{"ALICE_KEY": aliceKey, "BOB_KEY": bobKey, "CAROL_KEY": carolKey}, proxy.Options{})
	return m
}

// profileConfig is profileMux's config, with two fresh upstreams.
func profileConfig(t *testing.T, extra string) string {
	t.Helper()
	server := func(name string) string {
		s := mcptest.NewServer(name)
		s.AddResource(&mcp.Resource{URI: "res://" + name, Name: name + "-doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "res://" + name, Text: name + " doc"}}}, nil
		})
		s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
		return mcptest.ServeHTTP(t, s).URL + "/mcp"
	}
	cfg := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}},
	  "profiles": {
	    "a": {"servers": ["alpha"], "exclude_tools": ["alpha_sl*"]},
	    "b": {"servers": ["beta"], "include_tools": ["beta_e*", "beta_add"]}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY", "carol": "$CAROL_KEY"}},
	    "profile_by": {"api_keys": {"alice": "a", "bob": "b"}}} %s}`, server("alpha"), server("beta"), extra)
	return cfg
}

// connectProfile opens a 2025-11-25 session at endpoint with an api key.
func connectProfile(t *testing.T, endpoint, key string) (*mcp.ClientSession, error) {
	t.Helper()
	return connectProfileOpts(t, endpoint, key, nil)
}

// connectProfileOpts is connectProfile with client options.
func connectProfileOpts(t *testing.T, endpoint, key string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	rt := &clientRT{static: http.Header{"Authorization": {"Bearer " + key}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "profile-client", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// sessionTools is a session's tools/list names, sorted and joined.
func sessionTools(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	names := toolNames(t, cs)
	slices.Sort(names)
	return strings.Join(names, " ")
}

// unknownTool is the error of a call to a tool the caller's catalog does
// not have: the same whether another profile has it or nobody does.
func unknownTool(name string) string { return fmt.Sprintf("unknown tool %q", name) }

func TestProfilesSessionsByAPIKey(t *testing.T) {
	m := profileMux(t, "")
	ctx := context.Background()
	alice, err := connectProfile(t, m.ts.URL+"/mcp", aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := connectProfile(t, m.ts.URL+"/mcp", bobKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionTools(t, alice); got != profileA {
		t.Errorf("alice's tools %q, want %q", got, profileA)
	}
	if got := sessionTools(t, bob); got != profileB {
		t.Errorf("bob's tools %q, want %q", got, profileB)
	}
	// The other profile's tool, an excluded one, and one nobody has: the same error.
	for cs, names := range map[*mcp.ClientSession][]string{alice: {"beta_echo", "alpha_sleep", "gamma_echo"}, bob: {"alpha_echo", "beta_pid"}} {
		for _, name := range names {
			if _, _, err := call(ctx, cs, name, map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), unknownTool(name)) {
				t.Errorf("call %s: %v, want %s", name, err, unknownTool(name))
			}
		}
	}
	if text, isErr := mustCall(t, ctx, alice, "alpha_echo", map[string]any{"text": "mine"}); isErr || text != "mine" {
		t.Errorf("alice's own tool: %q %v", text, isErr)
	}
	// Resources and prompts: only the profile's servers'.
	if _, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://beta"}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "resource not found") {
		t.Errorf("alice reads beta's resource: %v", err)
	}
	if res, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://alpha"}); err != nil || res.Contents[0].Text != "alpha doc" {
		t.Errorf("alice reads her resource: %v", err)
	}
	rl, err := bob.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != "res://beta" {
		t.Errorf("bob's resources: %v %+v", err, rl)
	}
	pl, err := alice.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 || pl.Prompts[0].Name != "alpha_greet" {
		t.Errorf("alice's prompts: %v %+v", err, pl)
	}
	if _, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta_greet"}); err == nil {
		t.Error("alice got beta's prompt")
	}
	// carol is bound to no profile: every tool at /mcp.
	carol, err := connectProfile(t, m.ts.URL+"/mcp", carolKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionTools(t, carol); !strings.Contains(got, "alpha_sleep") || !strings.Contains(got, "beta_pid") {
		t.Errorf("carol's tools %q: want every tool", got)
	}
}

func TestProfilesByPath(t *testing.T) {
	m := profileMux(t, "")
	ctx := context.Background()
	// /mcp/{profile} gives an unbound caller that profile's view.
	for path, want := range map[string]string{"a": profileA, "b": profileB} {
		cs, err := connectProfile(t, m.ts.URL+"/mcp/"+path, carolKey)
		if err != nil {
			t.Fatalf("/mcp/%s: %v", path, err)
		}
		if got := sessionTools(t, cs); got != want {
			t.Errorf("/mcp/%s tools %q, want %q", path, got, want)
		}
		other := map[string]string{"a": "beta_echo", "b": "alpha_echo"}[path]
		if _, _, err := call(ctx, cs, other, map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), unknownTool(other)) {
			t.Errorf("/mcp/%s call %s: %v", path, other, err)
		}
	}
	// A caller's own profile by path works; another profile is refused,
	// and so is a profile that does not exist.
	if cs, err := connectProfile(t, m.ts.URL+"/mcp/a", aliceKey); err != nil || sessionTools(t, cs) != profileA {
		t.Errorf("alice at /mcp/a: %v", err)
	}
	for _, c := range []struct{ path, key string }{{"b", aliceKey}, {"a", bobKey}, {"nope", carolKey}} {
		status, _, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp/"+c.path, map[string]string{"Authorization": "Bearer " + c.key}, initializeBody)
		want := http.StatusForbidden
		if c.path == "nope" {
			want = http.StatusNotFound
		}
		if status != want {
			t.Errorf("/mcp/%s: HTTP %d %s, want %d", c.path, status, body, want)
		}
		if _, err := connectProfile(t, m.ts.URL+"/mcp/"+c.path, c.key); err == nil {
			t.Errorf("go-sdk client connected at /mcp/%s", c.path)
		}
	}
	// A session keeps the profile it was opened with: carol's /mcp/a
	// session is refused at /mcp (every tool) and at /mcp/b.
	cs, err := connectProfile(t, m.ts.URL+"/mcp/a", carolKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, endpoint := range []string{"/mcp", "/mcp/b"} {
		status, _, body := rawRequest(t, http.MethodPost, m.ts.URL+endpoint,
			map[string]string{"Authorization": "Bearer " + carolKey, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
		if status != http.StatusForbidden {
			t.Errorf("carol's /mcp/a session at %s: HTTP %d %s", endpoint, status, body)
		}
	}
}

// modernAs posts one 2026-07-28 request with an api key to endpoint.
func modernAs(t *testing.T, endpoint, key, method, name, params string) (int, rpcReply, string) {
	t.Helper()
	h := modernHeaders(method, name)
	h["Authorization"] = "Bearer " + key
	status, _, body := rawRequest(t, http.MethodPost, endpoint, h, modernBody(method, params))
	if !strings.Contains(body, `"jsonrpc"`) || status == http.StatusForbidden {
		return status, rpcReply{}, body
	}
	return status, reply(t, body), body
}

// modernTools is a 2026-07-28 tools/list's names, sorted and joined.
func modernTools(t *testing.T, endpoint, key string) string {
	t.Helper()
	status, r, body := modernAs(t, endpoint, key, "tools/list", "", "")
	if status != http.StatusOK || r.Error != nil {
		t.Fatalf("tools/list: HTTP %d %s", status, body)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(r.Result, &res)
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

func TestProfilesModernEra(t *testing.T) {
	m := profileMux(t, "")
	url := m.ts.URL + "/mcp"
	for _, c := range []struct{ endpoint, key, want string }{
		{url, aliceKey, profileA}, {url, bobKey, profileB}, {url + "/a", carolKey, profileA}, {url + "/b", carolKey, profileB}, {url + "/a", aliceKey, profileA},
	} {
		for range 2 { // the second list is the cached one
			if got := modernTools(t, c.endpoint, c.key); got != c.want {
				t.Errorf("%s tools %q, want %q", c.endpoint, got, c.want)
			}
		}
	}
	call := func(endpoint, key, name string) rpcReply {
		t.Helper()
		_, r, body := modernAs(t, endpoint, key, "tools/call", name, `"name":"`+name+`","arguments":{"text":"hi"}`)
		if r.ID == nil {
			t.Fatalf("call %s: %s", name, body)
		}
		return r
	}
	if r := call(url, aliceKey, "alpha_echo"); r.Error != nil || !strings.Contains(string(r.Result), "hi") {
		t.Errorf("alice's own tool: %+v", r)
	}
	for _, c := range []struct{ endpoint, key, name string }{{url, aliceKey, "beta_echo"}, {url, bobKey, "alpha_echo"}, {url + "/b", carolKey, "alpha_echo"}, {url, aliceKey, "alpha_sleep"}} {
		if r := call(c.endpoint, c.key, c.name); r.Error == nil || r.Error.Message != unknownTool(c.name) {
			t.Errorf("%s calls %s: %+v, want %s", c.endpoint, c.name, r, unknownTool(c.name))
		}
	}
	_, r, _ := modernAs(t, url, aliceKey, "resources/read", "res://beta", `"uri":"res://beta"`)
	if r.Error == nil {
		t.Errorf("alice reads beta's resource: %s", r.Result)
	}
	_, r, _ = modernAs(t, url, bobKey, "resources/read", "res://beta", `"uri":"res://beta"`)
	if r.Error != nil || !strings.Contains(string(r.Result), "beta doc") {
		t.Errorf("bob reads his resource: %+v", r)
	}
	if status, _, body := modernAs(t, url+"/b", aliceKey, "tools/list", "", ""); status != http.StatusForbidden {
		t.Errorf("alice at /mcp/b: HTTP %d %s", status, body)
	}
}

func TestProfilesToolSearch(t *testing.T) {
	m := profileMux(t, `, "tool_search": {"enabled": true}`)
	ctx := context.Background()
	alice, err := connectProfile(t, m.ts.URL+"/mcp", aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := connectProfile(t, m.ts.URL+"/mcp/b", carolKey)
	if err != nil {
		t.Fatal(err)
	}
	if ins := alice.InitializeResult().Instructions; strings.Contains(ins, "beta_") || !strings.Contains(ins, "alpha_echo") {
		t.Errorf("alice's instructions name other tools: %q", ins)
	}
	for cs, want := range map[*mcp.ClientSession]string{alice: "alpha_echo", bob: "beta_echo"} {
		_, names := search(t, cs, "echo")
		if !slices.Equal(names, []string{want}) {
			t.Errorf("tool_search echo: %v, want [%s]", names, want)
		}
	}
	if _, names := search(t, alice, "select:beta_echo,beta_add,alpha_add"); !slices.Equal(names, []string{"alpha_add"}) {
		t.Errorf("alice's select: %v", names)
	}
	if _, _, err := call(ctx, alice, "beta_echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), unknownTool("beta_echo")) {
		t.Errorf("alice calls beta_echo under tool_search: %v", err)
	}
	// 2026-07-28: tool_search finds only the caller's tools.
	_, r, body := modernAs(t, m.ts.URL+"/mcp", bobKey, "tools/call", "tool_search", `"name":"tool_search","arguments":{"query":"echo"}`)
	if r.Error != nil || !strings.Contains(string(r.Result), "beta_echo") || strings.Contains(string(r.Result), "alpha_") {
		t.Errorf("bob's modern tool_search: %s", body)
	}
}

// TestProfilesSessionOnAnyReplica: a session's profile is in its record,
// so another replica serves it under that profile, and refuses it under
// another.
func TestProfilesSessionOnAnyReplica(t *testing.T) {
	rs := startReplicas(t, 2, literalKeys(profileConfig(t, "")))
	cs, err := connectProfile(t, rs.muxes[0].ts.URL+"/mcp/a", carolKey)
	if err != nil {
		t.Fatal(err)
	}
	list := func(endpoint string) (int, string) {
		status, _, body := rawRequest(t, http.MethodPost, rs.muxes[1].ts.URL+endpoint,
			map[string]string{"Authorization": "Bearer " + carolKey, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)
		return status, body
	}
	if status, body := list("/mcp/a"); status != http.StatusOK || !strings.Contains(body, "alpha_echo") || strings.Contains(body, "beta_") {
		t.Errorf("replica 1 at /mcp/a: HTTP %d %s", status, body)
	}
	if status, body := list("/mcp"); status != http.StatusForbidden {
		t.Errorf("replica 1 at /mcp: HTTP %d %s", status, body)
	}
}

// literalKeys writes the test keys into a profile config in place of
// their $VARs.
func literalKeys(cfg string) string {
	for env, key := range map[string]string{"$ALICE_KEY": aliceKey, "$BOB_KEY": bobKey, "$CAROL_KEY": carolKey} {
		cfg = strings.ReplaceAll(cfg, `"`+env+`"`, `"`+key+`"`)
	}
	return cfg
}

// TestProfilesReloadChangesView: a reload that edits only a profile
// changes its callers' view, and tells their sessions.
func TestProfilesReloadChangesView(t *testing.T) {
	cfg := literalKeys(profileConfig(t, ""))
	m := startMux(t, cfg, proxy.Options{})
	opts, changed := listChanged()
	alice, err := connectProfileOpts(t, m.ts.URL+"/mcp", aliceKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionTools(t, alice); got != profileA {
		t.Fatalf("alice's tools %q", got)
	}
	next, err := config.Parse([]byte(strings.Replace(cfg, `"exclude_tools": ["alpha_sl*"]`, `"exclude_tools": ["alpha_sl*", "alpha_echo"]`, 1)), config.LoadOptions{Filename: "t.json"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.srv.Apply(next); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, changed, "tools/list_changed after the profile changed")
	if got := sessionTools(t, alice); strings.Contains(got, "alpha_echo") || !strings.Contains(got, "alpha_add") {
		t.Errorf("alice's tools after the reload: %q", got)
	}
	if _, _, err := call(context.Background(), alice, "alpha_echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), unknownTool("alpha_echo")) {
		t.Errorf("alpha_echo after the reload: %v", err)
	}
}
