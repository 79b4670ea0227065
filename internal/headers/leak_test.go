package headers

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a log sink safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger() (hclog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Trace}), buf
}

// TestNoSecretLeaks feeds distinctive secrets through every path, succeeding
// and failing, and checks that none reaches an error, a log line or fmt output.
func TestNoSecretLeaks(t *testing.T) {
	secrets := map[string]string{
		"static":        "STATIC-sekret-a1",
		"staticBad":     "STATIC-sekret-a2",
		"clientSecret":  "CLIENT-sekret-b1",
		"refreshToken":  "REFRESH-sekret-b2",
		"rotated":       "ROTATED-sekret-b3",
		"access":        "ACCESS-sekret-c1",
		"accessBad":     "ACCESS-sekret-c2",
		"body":          "BODY-sekret-c3",
		"userCred":      "USER-sekret-d1",
		"userBad":       "USER-sekret-d2",
		"carrier":       "CARRIER-sekret-e1",
		"carrierBad":    "CARRIER-sekret-e2",
		"carrierGarble": "CARRIER-sekret-e3",
	}
	s := secrets
	log, logBuf := testLogger()
	var outputs []string
	record := func(v ...any) {
		for _, x := range v {
			if x != nil {
				outputs = append(outputs, fmt.Sprintf("%v", x))
			}
		}
	}
	ctx := context.Background()

	// A static header value that cannot be sent.
	_, err := New(Options{Server: "srv", Logger: log, Static: map[string]string{"X-Key": s["staticBad"] + "\n"}})
	record(err)

	// A token endpoint that answers with the good token, then a bad one, then errors.
	var mu sync.Mutex
	mode := "good"
	ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) {
		mu.Lock()
		defer mu.Unlock()
		switch mode {
		case "good":
			return http.StatusOK, "application/json", `{"access_token":"` + s["access"] + `","refresh_token":"` + s["rotated"] + `","expires_in":3600}`
		case "illegal":
			return http.StatusOK, "application/json", `{"access_token":"` + s["accessBad"] + `\n"}`
		case "500":
			return 500, "text/plain", "trace: " + s["body"] + " " + s["clientSecret"]
		case "400":
			return 400, "application/json", `{"error":"invalid_grant","error_description":"` + s["refreshToken"] + `"}`
		default:
			return 200, "text/html", "<p>" + s["body"] + "</p>"
		}
	})
	setMode := func(m string) { mu.Lock(); mode = m; mu.Unlock() }

	r, err := New(Options{
		Server: "srv", Logger: log,
		Static: map[string]string{"X-Static": s["static"]},
		OAuth: &OAuthOptions{
			TokenURL: ts.URL, GrantType: GrantRefreshToken, RefreshToken: s["refreshToken"],
			ClientID: "cid", ClientSecret: s["clientSecret"], AuthStyle: AuthStylePost,
			ExtraParams: map[string]string{"client_secret": s["clientSecret"]},
		},
		UserAuth:    &UserAuthOptions{Users: map[string]string{"alice": "Bearer " + s["userCred"], "mallory": s["userBad"] + "\r\n"}},
		FromContext: &FromContextOptions{Headers: map[string]string{"X-Carrier": "carrier"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	record(r, fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), r.String())

	h, err := r.Base(ctx)
	record(err)
	if h.Get("Authorization") != "Bearer "+s["access"] {
		t.Fatalf("Base = %v, %v", h, err)
	}
	_, err = r.ForCall(ctx, "alice", map[string]string{"carrier": s["carrier"]})
	record(err)
	_, err = r.ForCall(ctx, "mallory", map[string]string{"carrier": s["carrier"]})
	record(err)
	_, err = r.ForCall(ctx, "alice", map[string]string{"carrier": s["carrierBad"] + "\x00"})
	record(err)
	_, err = r.ForCall(ctx, "bob", nil)
	record(err)
	_, err = r.ForCall(ctx, "alice", nil)
	record(err)
	for _, m := range []string{"illegal", "500", "400", "garbage"} {
		setMode(m)
		r.Unauthorized("Bearer " + s["access"])
		_, err = r.ForCall(ctx, "alice", map[string]string{"carrier": s["carrier"]})
		record(err)
		if err == nil {
			t.Fatalf("mode %s: no error", m)
		}
		_, err = r.Base(ctx)
		record(err)
	}
	// The rotated refresh token was used after the first fetch.
	if f := ts.request(1).form; f.Get("refresh_token") != s["rotated"] {
		t.Errorf("second fetch used refresh_token %q", f.Get("refresh_token"))
	}

	// The secrets carrier, good and bad.
	good := `{"carrier":"` + s["carrier"] + `"}`
	for _, in := range []string{
		good, base64.StdEncoding.EncodeToString([]byte(good)),
		`{"carrier":` + s["carrierGarble"] + `}`, `["` + s["carrierGarble"] + `"]`, s["carrierGarble"] + "%%",
		base64.URLEncoding.EncodeToString([]byte(`{"x":{"y":"` + s["carrierGarble"] + `"}}`)),
	} {
		_, err := ParseSecrets("X-Mux-Secrets", in)
		record(err)
	}

	all := strings.Join(outputs, "\n") + "\n" + logBuf.String()
	if len(outputs) < 15 {
		t.Fatalf("only %d outputs recorded", len(outputs))
	}
	for name, v := range secrets {
		if strings.Contains(all, v) || strings.Contains(all, strings.SplitN(v, "-", 2)[1]) {
			t.Errorf("secret %s leaked", name)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("outputs:\n%s", all)
	}
}
