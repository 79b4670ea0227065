package headers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func mustNew(t *testing.T, opts Options) *Resolver {
	t.Helper()
	if opts.Server == "" {
		opts.Server = "srv"
	}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

func wantHeader(t *testing.T, got http.Header, want map[string]string) {
	t.Helper()
	w := http.Header{}
	for k, v := range want {
		w[k] = []string{v}
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("headers = %v, want %v", got, w)
	}
}

func wantDeny(t *testing.T, err error, msg string) {
	t.Helper()
	var d *DenyError
	if !errors.As(err, &d) {
		t.Fatalf("error = %v (%T), want *DenyError", err, err)
	}
	if d.Msg != msg || err.Error() != msg {
		t.Fatalf("deny message\n got: %s\nwant: %s", d.Msg, msg)
	}
}

func TestNewRejects(t *testing.T) {
	const value = "VALUE-must-not-appear"
	cc := func(o OAuthOptions) *OAuthOptions {
		if o.TokenURL == "" {
			o.TokenURL = "http://127.0.0.1:1/token"
		}
		return &o
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"static value with newline", Options{Static: map[string]string{"X-Key": value + "\n"}},
			`MCP server 'srv': the value of header "X-Key" contains a line break or another forbidden control character, so it cannot be sent as an HTTP header`},
		{"static value non-ASCII", Options{Static: map[string]string{"X-Key": value + "\u00e9"}}, "contains characters outside ASCII"},
		{"static value padded", Options{Static: map[string]string{"X-Key": " " + value}}, "has leading or trailing whitespace"},
		{"static bad name", Options{Static: map[string]string{"X Key": value}}, `headers: "X Key"`},
		{"static two spellings", Options{Static: map[string]string{"X-Key": value, "x-key": value}},
			`MCP server 'srv': headers sets the same HTTP header under two spellings ("X-Key" and "x-key"); header names are case-insensitive, so keep only one`},
		{"user_auth on_missing", Options{UserAuth: &UserAuthOptions{OnMissing: "maybe"}}, "user_auth.on_missing must be 'deny' or 'passthrough'"},
		{"user_auth bad header", Options{UserAuth: &UserAuthOptions{Header: "A:B"}}, "user_auth.header"},
		{"ctx blank name", Options{FromContext: &FromContextOptions{Headers: map[string]string{" ": "k"}}},
			"MCP server 'srv': headers_from_context.headers must not contain a blank header name"},
		{"ctx blank key", Options{FromContext: &FromContextOptions{Headers: map[string]string{"X-Tenant": " "}}},
			"MCP server 'srv': headers_from_context.headers['X-Tenant'] must name a non-blank key of the request's secrets (the inbound.secrets_header object)"},
		{"ctx two spellings", Options{FromContext: &FromContextOptions{Headers: map[string]string{"X-Tenant": "a", "x-tenant": "b"}}},
			"MCP server 'srv': headers_from_context.headers maps the same HTTP header under two spellings ('X-Tenant' and 'x-tenant'); header names are case-insensitive, so keep only one"},
		{"ctx on_missing", Options{FromContext: &FromContextOptions{Headers: map[string]string{"X": "k"}, OnMissing: "no"}}, "headers_from_context.on_missing"},
		{"client_credentials without secret", Options{OAuth: cc(OAuthOptions{ClientID: "id"})},
			"MCP server 'srv': OAuth client_credentials requires client_id and client_secret"},
		{"client_credentials without id", Options{OAuth: cc(OAuthOptions{ClientSecret: value})},
			"OAuth client_credentials requires client_id and client_secret"},
		{"refresh_token without token", Options{OAuth: cc(OAuthOptions{GrantType: "refresh_token"})},
			"MCP server 'srv': OAuth refresh_token grant requires refresh_token"},
		{"unknown grant", Options{OAuth: cc(OAuthOptions{GrantType: "password", ClientSecret: value})}, "OAuth grant_type must be"},
		{"no token url or resource", Options{OAuth: &OAuthOptions{ClientID: "id", ClientSecret: value}}, "OAuth needs token_url"},
		{"bad token url", Options{OAuth: &OAuthOptions{TokenURL: "ftp://x/p?k=" + value, ClientID: "id", ClientSecret: value}}, "is not an http(s) URL"},
		{"bad auth style", Options{OAuth: cc(OAuthOptions{ClientID: "id", ClientSecret: value, AuthStyle: "jwt"})}, "OAuth auth_style must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Server = "srv"
			r, err := New(tt.opts)
			if err == nil {
				r.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "VALUE") {
				t.Errorf("error %q repeats a value", err)
			}
		})
	}
}

// TestPrecedence: static < oauth < user_auth < headers_from_context, with the
// static spelling on the wire and one spelling per header.
func TestPrecedence(t *testing.T) {
	ts := newTokenServer(t, func(n int, _ tokenRequest) (int, string, string) { return jsonToken("oauth-tok", 3600) })
	base := func() Options {
		return Options{
			Static: map[string]string{"authorization": "Static s", "X-Tenant": "t-static", "X-Other": "o"},
			OAuth:  &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"},
		}
	}
	ctx := context.Background()

	t.Run("static < oauth", func(t *testing.T) {
		r := mustNew(t, base())
		h, err := r.Base(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, h, map[string]string{"authorization": "Bearer oauth-tok", "X-Tenant": "t-static", "X-Other": "o"})
		h, err = r.ForCall(ctx, "alice", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, h, map[string]string{"authorization": "Bearer oauth-tok", "X-Tenant": "t-static", "X-Other": "o"})
	})

	t.Run("oauth < user_auth", func(t *testing.T) {
		o := base()
		o.UserAuth = &UserAuthOptions{Header: "AUTHORIZATION", Users: map[string]string{"alice": "Bearer alice-cred"}}
		r := mustNew(t, o)
		h, err := r.ForCall(ctx, "alice", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, h, map[string]string{"authorization": "Bearer alice-cred", "X-Tenant": "t-static", "X-Other": "o"})
		// Base has no caller: no user_auth.
		h, _ = r.Base(ctx)
		wantHeader(t, h, map[string]string{"authorization": "Bearer oauth-tok", "X-Tenant": "t-static", "X-Other": "o"})
	})

	t.Run("user_auth < headers_from_context", func(t *testing.T) {
		o := base()
		o.UserAuth = &UserAuthOptions{Users: map[string]string{"alice": "Bearer alice-cred"}}
		o.FromContext = &FromContextOptions{Headers: map[string]string{"Authorization": "token", "x-tenant": "tenant"}}
		r := mustNew(t, o)
		h, err := r.ForCall(ctx, "alice", map[string]string{"token": "Bearer from-ctx", "tenant": "t-ctx", "unused": "x"})
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, h, map[string]string{"authorization": "Bearer from-ctx", "X-Tenant": "t-ctx", "X-Other": "o"})
	})
}

// TestEmittedSpelling: without a static spelling the first override's spelling
// is kept, whatever later layers call the header.
func TestEmittedSpelling(t *testing.T) {
	ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) { return jsonToken("oauth-tok", 3600) })
	r := mustNew(t, Options{
		OAuth:       &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"},
		UserAuth:    &UserAuthOptions{Header: "authorization", Users: map[string]string{"bob": "Basic Ym9i"}},
		FromContext: &FromContextOptions{Headers: map[string]string{"AUTHORIZATION": "tok", "x-api-key": "key"}},
	})
	h, err := r.ForCall(context.Background(), "bob", map[string]string{"tok": "Bearer ctx", "key": "k1"})
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"Authorization": "Bearer ctx", "x-api-key": "k1"})

	// Without OAuth, user_auth's spelling wins over headers_from_context's.
	r2 := mustNew(t, Options{
		UserAuth:    &UserAuthOptions{Header: "authorization", Users: map[string]string{"bob": "Basic Ym9i"}},
		FromContext: &FromContextOptions{Headers: map[string]string{"AUTHORIZATION": "tok"}, OnMissing: OnMissingPassthrough},
	})
	h, _ = r2.ForCall(context.Background(), "bob", nil)
	wantHeader(t, h, map[string]string{"authorization": "Basic Ym9i"})
	h, _ = r2.ForCall(context.Background(), "bob", map[string]string{"tok": "Bearer ctx"})
	wantHeader(t, h, map[string]string{"authorization": "Bearer ctx"})
}

// TestWireSpelling sends ForCall's headers, merged into a request that already
// carries another spelling, to a raw TCP server and reads the header lines.
func TestWireSpelling(t *testing.T) {
	r := mustNew(t, Options{
		Static:      map[string]string{"x-api-key": "static"},
		FromContext: &FromContextOptions{Headers: map[string]string{"X-API-KEY": "key"}},
	})
	h, err := r.ForCall(context.Background(), "u", map[string]string{"key": "from-ctx"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lines := make(chan []string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			lines <- nil
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		var got []string
		for {
			l, err := br.ReadString('\n')
			if err != nil || l == "\r\n" {
				break
			}
			got = append(got, strings.TrimRight(l, "\r\n"))
		}
		fmt.Fprint(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		lines <- got
	}()
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	req.Header.Set("X-Api-Key", "sdk-set") // canonical spelling already present
	Apply(req.Header, h)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var keyLines []string
	for _, l := range <-lines {
		if strings.HasPrefix(strings.ToLower(l), "x-api-key:") {
			keyLines = append(keyLines, l)
		}
	}
	if len(keyLines) != 1 || keyLines[0] != "x-api-key: from-ctx" {
		t.Fatalf("x-api-key lines on the wire = %q, want exactly [\"x-api-key: from-ctx\"]", keyLines)
	}
}

func TestUserAuth(t *testing.T) {
	ctx := context.Background()
	static := map[string]string{"Authorization": "Bearer static"}
	users := map[string]string{"alice": "Bearer alice", "default": "Bearer anon", "mallory": "Bearer evil\r\nX-Admin: 1", "eve": ""}

	deny := mustNew(t, Options{Static: static, UserAuth: &UserAuthOptions{Users: users}})
	pass := mustNew(t, Options{Static: static, UserAuth: &UserAuthOptions{Users: users, OnMissing: OnMissingPassthrough}})

	h, err := deny.ForCall(ctx, "alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"Authorization": "Bearer alice"})
	h, err = deny.ForCall(ctx, "", nil) // anonymous → "default"
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"Authorization": "Bearer anon"})

	missing := "No credential is configured for your account (user id 'bob') on MCP server 'srv'. " +
		"Ask the operator to add this exact id to that server's user_auth.users map (or set its environment variable)."
	_, err = deny.ForCall(ctx, "bob", nil)
	wantDeny(t, err, missing)
	_, err = deny.ForCall(ctx, "eve", nil) // empty credential counts as missing
	wantDeny(t, err, strings.ReplaceAll(missing, "'bob'", "'eve'"))

	h, err = pass.ForCall(ctx, "bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"Authorization": "Bearer static"})

	illegal := "The credential configured for your account (user id 'mallory') on MCP server 'srv' " +
		"contains a line break or another forbidden control character, so it cannot be sent as an HTTP header. " +
		"Ask the operator to fix that server's user_auth.users entry; a stray newline in the value or its environment variable is the usual cause."
	for _, r := range []*Resolver{deny, pass} { // illegal is denied whatever on_missing says
		_, err = r.ForCall(ctx, "mallory", nil)
		wantDeny(t, err, illegal)
	}
	// Anonymous and unmapped: denied, naming "default".
	noDefault := mustNew(t, Options{UserAuth: &UserAuthOptions{Users: map[string]string{"alice": "x"}}})
	_, err = noDefault.ForCall(ctx, "", nil)
	wantDeny(t, err, strings.ReplaceAll(missing, "'bob'", "'default'"))
}

func TestFromContext(t *testing.T) {
	ctx := context.Background()
	static := map[string]string{"X-Tenant": "t-static"}
	mappings := map[string]string{"X-Tenant": "tenant", "X-Api-Key": "api_key", "X-Region": "region"}
	deny := mustNew(t, Options{Static: static, FromContext: &FromContextOptions{Headers: mappings, Carrier: "X-Secrets"}})
	pass := mustNew(t, Options{Static: static, FromContext: &FromContextOptions{Headers: mappings, OnMissing: OnMissingPassthrough, Carrier: "X-Secrets"}})

	all := map[string]string{"tenant": "t1", "api_key": "k1", "region": "eu"}
	h, err := deny.ForCall(ctx, "u", all)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"X-Tenant": "t1", "X-Api-Key": "k1", "X-Region": "eu"})

	wantMissing := "MCP server 'srv' needs request-scoped credential(s) api_key, tenant. " +
		"Send them in the X-Secrets request header (a JSON object of key → value), or set this server's headers_from_context.on_missing to 'passthrough'."
	_, err = deny.ForCall(ctx, "u", map[string]string{"region": "eu", "tenant": ""})
	wantDeny(t, err, wantMissing)

	h, err = pass.ForCall(ctx, "u", map[string]string{"region": "eu"})
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"X-Tenant": "t-static", "X-Region": "eu"})
	h, err = pass.ForCall(ctx, "u", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader(t, h, map[string]string{"X-Tenant": "t-static"})

	wantIllegal := "MCP server 'srv' cannot send request-scoped credential(s) as HTTP header values: " +
		"'api_key' contains a line break or another forbidden control character; 'tenant' has leading or trailing whitespace. " +
		"Fix the value passed in the X-Secrets request header; a stray newline picked up when reading a token from a file is the usual cause."
	bad := map[string]string{"tenant": "t1 ", "api_key": "k1\n", "region": "eu"}
	for _, r := range []*Resolver{deny, pass} {
		_, err = r.ForCall(ctx, "u", bad)
		wantDeny(t, err, wantIllegal)
	}
	// Illegal wins over missing.
	_, err = deny.ForCall(ctx, "u", map[string]string{"api_key": "k\u00e9"})
	wantDeny(t, err, "MCP server 'srv' cannot send request-scoped credential(s) as HTTP header values: "+
		"'api_key' contains characters outside ASCII. "+
		"Fix the value passed in the X-Secrets request header; a stray newline picked up when reading a token from a file is the usual cause.")
}

func TestPerCaller(t *testing.T) {
	tests := []struct {
		opts Options
		want bool
	}{
		{Options{}, false},
		{Options{Static: map[string]string{"A": "b"}}, false},
		{Options{UserAuth: &UserAuthOptions{}}, true},
		{Options{FromContext: &FromContextOptions{}}, false}, // nothing mapped
		{Options{FromContext: &FromContextOptions{Headers: map[string]string{"A": "k"}}}, true},
	}
	for i, tt := range tests {
		if got := mustNew(t, tt.opts).PerCaller(); got != tt.want {
			t.Errorf("case %d: PerCaller = %v, want %v", i, got, tt.want)
		}
	}
}

func TestApply(t *testing.T) {
	dst := http.Header{"Authorization": {"old"}, "AUTHORIZATION": {"older"}, "Accept": {"a"}}
	src := http.Header{"authorization": {"new"}}
	Apply(dst, src)
	want := http.Header{"authorization": {"new"}, "Accept": {"a"}}
	if !reflect.DeepEqual(dst, want) {
		t.Fatalf("got %v, want %v", dst, want)
	}
	src["authorization"][0] = "mutated"
	if dst["authorization"][0] != "new" {
		t.Fatal("Apply shares the value slice")
	}
}

func TestResultsAreFresh(t *testing.T) {
	r := mustNew(t, Options{Static: map[string]string{"X-A": "1"}})
	h, _ := r.ForCall(context.Background(), "u", nil)
	h["X-A"][0] = "changed"
	h["X-B"] = []string{"added"}
	h2, _ := r.ForCall(context.Background(), "u", nil)
	wantHeader(t, h2, map[string]string{"X-A": "1"})
}

// TestIllegalValueEverySource: a value that cannot be a header value is refused
// from every source, with the reason and never the value.
func TestIllegalValueEverySource(t *testing.T) {
	ctx := context.Background()
	bad := map[string]string{
		"contains a line break or another forbidden control character": "VAL-x\r\nX-Evil: 1",
		"contains characters outside ASCII":                            "VAL-\u00fc",
		"has leading or trailing whitespace":                           "VAL-x ",
	}
	for reason, v := range bad {
		t.Run(reason, func(t *testing.T) {
			var errs []error
			_, err := New(Options{Server: "srv", Static: map[string]string{"X-K": v}})
			errs = append(errs, err)

			ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) {
				b, _ := json.Marshal(map[string]string{"access_token": v})
				return http.StatusOK, "application/json", string(b)
			})
			r := mustNew(t, Options{OAuth: &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "s"}})
			_, err = r.ForCall(ctx, "u", nil)
			errs = append(errs, err)

			r = mustNew(t, Options{UserAuth: &UserAuthOptions{Users: map[string]string{"u": v}, OnMissing: OnMissingPassthrough}})
			_, err = r.ForCall(ctx, "u", nil)
			errs = append(errs, err)

			r = mustNew(t, Options{FromContext: &FromContextOptions{Headers: map[string]string{"X-K": "k"}, OnMissing: OnMissingPassthrough}})
			_, err = r.ForCall(ctx, "u", map[string]string{"k": v})
			errs = append(errs, err)

			for i, err := range errs {
				if err == nil {
					t.Errorf("source %d accepted the value", i)
					continue
				}
				var d *DenyError
				if i > 0 && !errors.As(err, &d) {
					t.Errorf("source %d: %T is not a *DenyError", i, err)
				}
				if !strings.Contains(err.Error(), reason) || strings.Contains(err.Error(), "VAL-") {
					t.Errorf("source %d: %q", i, err)
				}
			}
		})
	}
}
