package headers

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
)

func TestParseSecrets(t *testing.T) {
	const obj = `{"api_key":"k-1","tenant":"t/2+?"}`
	want := map[string]string{"api_key": "k-1", "tenant": "t/2+?"}
	// The tenant value makes the std and URL alphabets differ.
	ok := []struct{ name, value string }{
		{"json", obj},
		{"json with surrounding space", "  " + obj + " "},
		{"base64 std", base64.StdEncoding.EncodeToString([]byte(obj))},
		{"base64 std unpadded", base64.RawStdEncoding.EncodeToString([]byte(obj))},
		{"base64 url", base64.URLEncoding.EncodeToString([]byte(obj))},
		{"base64 url unpadded", base64.RawURLEncoding.EncodeToString([]byte(obj))},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSecrets("X-Mux-Secrets", tt.value)
			if err != nil {
				t.Fatalf("ParseSecrets: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}

	t.Run("empty", func(t *testing.T) {
		got, err := ParseSecrets("X-Mux-Secrets", "")
		if got != nil || err != nil {
			t.Fatalf("got %v, %v; want nil, nil", got, err)
		}
	})
	t.Run("empty object", func(t *testing.T) {
		got, err := ParseSecrets("X-Mux-Secrets", "{}")
		if err != nil || len(got) != 0 {
			t.Fatalf("got %v, %v", got, err)
		}
	})

	const secretish = "sk-live-DO-NOT-ECHO-4242"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	bad := []struct{ name, value, want string }{
		{"not an object", `["` + secretish + `"]`, "must hold a JSON object"},
		{"string", `"` + secretish + `"`, "must hold a JSON object"},
		{"null", `null`, "must hold a JSON object"},
		{"number value", `{"a":"` + secretish + `","n":42}`, "a value is not a string"},
		{"null value", `{"a":null}`, "a value is not a string"},
		{"nested value", `{"a":{"b":"` + secretish + `"}}`, "a value is not a string"},
		{"broken json", `{"key-` + secretish + `": }`, "must hold a JSON object"},
		{"trailing data", `{"a":"b"} ` + secretish, "must hold a JSON object"},
		{"invalid base64", secretish + "!!", "neither a JSON object nor base64"},
		{"base64 of non-json", b64(secretish), "must hold a JSON object"},
		{"base64 of array", b64(`["` + secretish + `"]`), "must hold a JSON object"},
		{"base64 of non-string value", b64(`{"k":true,"s":"` + secretish + `"}`), "a value is not a string"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSecrets("X-Mux-Secrets", tt.value)
			if err == nil {
				t.Fatalf("accepted: %v", got)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"X-Mux-Secrets"`) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q: want the header name and %q", msg, tt.want)
			}
			for _, leak := range []string{secretish, "DO-NOT", "key-", "4242"} {
				if strings.Contains(msg, leak) {
					t.Errorf("error %q repeats content %q", msg, leak)
				}
			}
		})
	}
}

// parseSecretsErrors are the only messages ParseSecrets may return for header "H".
var parseSecretsErrors = []string{
	`secrets header "H" is neither a JSON object nor base64 of one`,
	`secrets header "H" must hold a JSON object (as JSON text or base64 of it)`,
	`secrets header "H" must map names to strings, but a value is not a string`,
}

func FuzzParseSecrets(f *testing.F) {
	for _, s := range []string{
		"", "{}", `{"a":"b"}`, `{"a":1}`, `["x"]`, "null", "eyJhIjoiYiJ9", "eyJhIjoiYiJ9Cg==",
		"e30", "!!", `{"a":"\u00e9\n"}`, `{"a":"b"}{"c":"d"}`, "\x00", `{"a":"b","a":"c"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseSecrets("H", in)
		if err != nil {
			msg := err.Error()
			known := false
			for _, m := range parseSecretsErrors {
				known = known || msg == m
			}
			if !known {
				t.Fatalf("unexpected error text %q", msg)
			}
			if len(in) > 8 && strings.Contains(msg, in) && !strings.Contains(strings.Join(parseSecretsErrors, "\n"), in) {
				t.Fatalf("error %q repeats the input", msg)
			}
			if got != nil {
				t.Fatalf("error with a result")
			}
			return
		}
		if strings.TrimSpace(in) == "" {
			if got != nil {
				t.Fatalf("empty input gave %v", got)
			}
			return
		}
		if got == nil {
			t.Fatalf("nil map without error for %q", in)
		}
	})
}
