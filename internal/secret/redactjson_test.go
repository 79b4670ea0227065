package secret

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRedactJSON(t *testing.T) {
	var sc Scrubber
	sc.Add("ghp_knownvalue123")
	raw := `{"query":"weather in Paris","password":"hunter2-long","nested":{"api_key":{"v":"x"},"Access-Token":"abc","author":"Ann"},` +
		`"list":[1,2.50,true,null,"uses ghp_knownvalue123 inline"],"x-auth":"a","count":3}`
	got, err := RedactJSON([]byte(raw), &sc, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"query":"weather in Paris","password":"[REDACTED]","nested":{"api_key":"[REDACTED]","Access-Token":"[REDACTED]","author":"Ann"},` +
		`"list":[1,2.50,true,null,"uses [REDACTED] inline"],"x-auth":"[REDACTED]","count":3}`
	if string(got) != want {
		t.Errorf("RedactJSON =\n%s\nwant\n%s", got, want)
	}
	for _, s := range []string{"hunter2", "ghp_knownvalue123", `"x"`, "abc"} {
		if strings.Contains(string(got), s) {
			t.Errorf("redacted document still holds %q: %s", s, got)
		}
	}
}

func TestRedactJSONBounds(t *testing.T) {
	deep := strings.Repeat("[", MaxRedactDepth+2) + strings.Repeat("]", MaxRedactDepth+2)
	for name, in := range map[string]string{
		"not JSON":   `{"a":`,
		"trailing":   `{} {}`,
		"too deep":   deep,
		"too large":  `{"a":"` + strings.Repeat("x", 200) + `"}`,
		"bare comma": `[1,,2]`,
	} {
		if _, err := RedactJSON([]byte(in), nil, 100); !errors.Is(err, ErrRedact) {
			t.Errorf("%s: err = %v, want ErrRedact", name, err)
		}
	}
	if got, err := RedactJSON([]byte(`"plain"`), nil, 100); err != nil || string(got) != `"plain"` {
		t.Errorf("a string document = %s, %v", got, err)
	}
}

func TestSensitiveKey(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "DB_PASSWORD": true, "client_secret": true, "refresh-token": true, "apiKey": true,
		"oauth": true, "Authorization": true, "user_pin": true, "cookie": true,
		"author": false, "query": false, "path": false, "keywords": false, "spinner": false, "options": false,
	} {
		if SensitiveKey(name) != want {
			t.Errorf("SensitiveKey(%q) = %v, want %v", name, !want, want)
		}
	}
}

// FuzzRedactJSON: any input is either refused or turned into valid JSON
// within the bound that holds no sensitive member's value.
func FuzzRedactJSON(f *testing.F) {
	for _, s := range []string{`{"password":"p4ssw0rd!","a":[1,{"token":"t0k3n-value"}]}`, `[]`, `"s"`, `{"a":{"b":{"c":null}}}`, `[[[[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := RedactJSON([]byte(in), nil, 1<<12)
		if err != nil {
			return
		}
		if !json.Valid(out) || len(out) > 1<<12+64 {
			t.Fatalf("RedactJSON(%q) = %q: not valid JSON or over the bound", in, out)
		}
		var v any
		_ = json.Unmarshal(out, &v)
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, c := range x {
					if SensitiveKey(k) && c != Redacted {
						t.Fatalf("member %q kept %v in %s", k, c, out)
					}
					walk(c)
				}
			case []any:
				for _, c := range x {
					walk(c)
				}
			}
		}
		walk(v)
	})
}
