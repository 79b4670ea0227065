package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// An upstream that quotes the credentials of a call in its errors (a tool
// error result, a JSON-RPC error's message and data) reveals none of them:
// not the OAuth token (from a real token endpoint), not the caller's
// user_auth value, not a value from the secrets carrier; not in the answer
// the client gets, the mux's log or its status snapshot.
func TestEchoedCredentialsAreScrubbed(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewLeakyServer("leaky"))
	tok := startTokenServer(t, "oauth-leak-token", nil)
	cfg := fmt.Sprintf(`{
	  "inbound": {"auth": {"mode": "trusted_header"}},
	  "mcpServers": {"up": {"type": "http", "url": %q,
	    "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "$CLIENT_SECRET"},
	    "user_auth": {"header": "X-User-Cred", "users": {"alice": "$ALICE_CRED"}},
	    "headers_from_context": {"headers": {"X-Ctx-Key": "api_key"}}}}}`, up.URL+"/mcp", tok.URL)
	secrets := []string{"oauth-leak-token-1", "client-leak-secret", "alice-leak-cred", "ctx-leak-key"}
	m, _ := startMuxEnv(t, cfg, map[string]string{"CLIENT_SECRET": "client-leak-secret", "ALICE_CRED": "alice-leak-cred"}, proxy.Options{})
	alice, rt := connectAs(t, m.ts.URL, "X-Mux-User", "alice")
	ctx := withHeaders(context.Background(), "X-Mux-Secrets", secretsJSON("api_key", "ctx-leak-key"))

	var answers []string
	text, isErr, err := call(ctx, alice, "up_leak_result", nil)
	if err != nil || !isErr {
		t.Fatalf("leak_result: isError=%v err=%v, want a tool error", isErr, err)
	}
	answers = append(answers, text)
	_, _, err = call(ctx, alice, "up_leak_error", nil)
	if err == nil {
		t.Fatal("leak_error: no error")
	}
	answers = append(answers, err.Error())
	// The upstream did quote the headers (their names survive the scrub).
	for _, a := range answers {
		for _, name := range []string{"Authorization=", "X-User-Cred=", "X-Ctx-Key="} {
			if !strings.Contains(a, name) {
				t.Errorf("the upstream's error does not quote %s: %q", strings.TrimSuffix(name, "="), a)
			}
		}
	}
	status, _ := json.Marshal(m.srv.Status())
	places := map[string]string{
		"the answers":         strings.Join(answers, "\n"),
		"the raw responses":   strings.Join(rt.responses(), "\n"),
		"the log":             m.logs.String(),
		"the status snapshot": string(status),
	}
	for where, s := range places {
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Errorf("%q reached %s:\n%.2000s", sec, where, s)
			}
		}
	}
}

// A stdio server that prints its credential (an env value) on stderr has
// the line logged with the value scrubbed.
func TestStdioStderrCredentialIsScrubbed(t *testing.T) {
	srv := stdioServerJSON(t, "local", mcptest.StdioOptions{EchoEnv: "API_TOKEN"}, "")
	srv = strings.Replace(srv, `"env": {`, `"env": {"API_TOKEN": "$STDIO_SECRET", `, 1)
	m, _ := startMuxEnv(t, `{"mcpServers": {`+srv+`}}`, map[string]string{"STDIO_SECRET": "stdio-leak-secret"}, proxy.Options{})
	deadline := time.Now().Add(20 * time.Second)
	// The line comes before "ready" (the env variable's name is an env
	// value as well, so it is scrubbed too).
	for !strings.Contains(m.logs.String(), "starting with ") || !strings.Contains(m.logs.String(), "stdio test server ready") {
		if time.Now().After(deadline) {
			t.Fatalf("the server's stderr line never reached the log in 20s:\n%.3000s", m.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if logs := m.logs.String(); strings.Contains(logs, "stdio-leak-secret") {
		t.Fatalf("the stdio env value reached the log:\n%.3000s", logs)
	}
}
