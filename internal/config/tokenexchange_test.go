package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTokenExchange(t *testing.T) {
	s, problems, _ := problemsOf(t, `{"type": "http", "url": "http://h", "token_exchange": {
	  "token_url": "https://auth.example/token", "client_id": "mux", "client_secret": "$XS",
	  "audience": "https://api.example", "actor_token": "$ACTOR"}}`, map[string]string{"XS": "sekrit-xs", "ACTOR": "sekrit-actor"})
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	want := TokenExchange{
		Enabled: true, TokenURL: "https://auth.example/token", ClientID: "mux", ClientSecret: "sekrit-xs", AuthStyle: "auto",
		SubjectHeader: "Authorization", SubjectTokenType: TokenTypeAccess, Audience: "https://api.example",
		RequestedTokenType: TokenTypeAccess, ActorToken: "sekrit-actor", ActorTokenType: TokenTypeAccess,
		Header: "Authorization", TokenPrefix: "Bearer", RefreshSkew: 60 * time.Second,
	}
	if !reflect.DeepEqual(*s.TokenExchange, want) {
		t.Errorf("token_exchange = %+v\nwant %+v", *s.TokenExchange, want)
	}

	for block, want := range map[string]string{
		`{"client_id": "c"}`: "token_exchange.token_url: token exchange needs token_url, the token endpoint of the authorization server",
		`{"client_id": "c", "token_url": "ftp://auth/token"}`:        "token_exchange.token_url: must be an absolute http or https URL",
		`{"token_url": "https://auth/token"}`:                        "token_exchange.client_id: token exchange needs client_id, mcp-mux's client at the token endpoint",
		`{"token_url": "https://auth/token", "client_id": ""}`:       "token_exchange.client_id: token exchange needs client_id, mcp-mux's client at the token endpoint",
		`{"enabled": false, "auth_style": "jwt"}`:                    "token_exchange.auth_style: must be one of 'auto', 'basic' or 'post'",
		`{"enabled": false, "subject_header": "Bad Header"}`:         "token_exchange.subject_header: header name contains a character that is not allowed in an HTTP header name",
		`{"enabled": false, "header": ""}`:                           "token_exchange.header: header name must not be empty",
		`{"enabled": false, "subject_token_type": "jwt"}`:            "token_exchange.subject_token_type: must be a token type URN such as " + TokenTypeAccess,
		`{"enabled": false, "requested_token_type": "access_token"}`: "token_exchange.requested_token_type: must be a token type URN such as " + TokenTypeAccess,
		`{"enabled": false, "resource": "/relative"}`:                "token_exchange.resource: must be an absolute URI without a fragment (RFC 8707)",
		`{"enabled": false, "token_prefix": "Bearer x"}`:             "token_exchange.token_prefix: must be one word such as Bearer, or \"\" for the bare token",
		`{"enabled": false, "refresh_skew_seconds": -1}`:             "token_exchange.refresh_skew_seconds: must be between 0 and 86400 seconds",
		`{"enabled": false, "subject_tokn_type": "x"}`:               "token_exchange.subject_tokn_type: unknown key; did you mean \"subject_token_type\"?",
		`"urn:ietf:params:oauth:grant-type:token-exchange"`:          "token_exchange: must be an object",
	} {
		_, got, _ := problemsOf(t, `{"type": "http", "url": "http://h", "token_exchange": `+block+`}`, nil)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: problems = %q\nwant %q", block, got, want)
		}
	}

	// Secrets never in a problem; a stdio server ignores the block with a warning.
	_, got, _ := problemsOf(t, `{"type": "http", "url": "http://h", "token_exchange": {"token_url": "https://auth/token?k=sekrit-q", "client_secret": "sekrit-cs"}}`, nil)
	if strings.Contains(strings.Join(got, "\n"), "sekrit") || len(got) != 1 {
		t.Errorf("problems = %q", got)
	}
	s, problems, warnings := problemsOf(t, `{"command": "x", "token_exchange": {"token_url": "https://auth/token", "client_id": "c"}}`, nil)
	if s == nil || !s.TokenExchange.Ignored || len(warnings) != 1 || warnings[0].Field != "token_exchange" {
		t.Errorf("stdio: %q %+v", problems, warnings)
	}
	// Task polls carry no caller, so no exchanged token: a warning says so.
	_, _, warnings = problemsOf(t, `{"type": "http", "url": "http://h", "token_exchange": {"token_url": "https://auth/token", "client_id": "c"},
	  "task_toolsets": [{"name": "t", "submit_tool": "s", "status_tool": "st", "cancel_tool": "c"}]}`, nil)
	if len(warnings) != 1 || warnings[0].Field != "token_exchange" || !strings.Contains(warnings[0].Message, "polls") {
		t.Errorf("task_toolsets: warnings %+v", warnings)
	}
}
