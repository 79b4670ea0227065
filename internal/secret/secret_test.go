package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const plain = "hunter2-very-secret-token"

type holder struct {
	Name  string
	Token Value
	Map   map[string]Value
	List  []Value
	Ptr   *Value
}

func TestRedactsInFmt(t *testing.T) {
	v := Value(plain)
	h := holder{Name: "x", Token: v, Map: map[string]Value{"k": v}, List: []Value{v}, Ptr: &v}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%-8v"} {
		for _, arg := range []any{v, h, &h} {
			got := fmt.Sprintf(format, arg)
			if strings.Contains(got, plain) || strings.Contains(got, fmt.Sprintf("%x", plain)) {
				t.Errorf("Sprintf(%q, %T) leaked the plaintext: %s", format, arg, got)
			}
		}
	}
	if got := fmt.Sprint(v); got != Redacted {
		t.Errorf("Sprint = %q, want %q", got, Redacted)
	}
	if got := fmt.Sprintf("%q", v); got != `"[REDACTED]"` {
		t.Errorf("%%q = %s", got)
	}
	if got := v.String() + fmt.Sprint(Value("")); got != Redacted {
		t.Errorf("empty value should print as empty, got %q", got)
	}
}

func TestRedactsInJSON(t *testing.T) {
	v := Value(plain)
	data, err := json.Marshal(holder{Token: v, Map: map[string]Value{"k": v}, List: []Value{v}, Ptr: &v})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(plain)) {
		t.Fatalf("json leaked the plaintext: %s", data)
	}
	if !bytes.Contains(data, []byte(`"Token":"[REDACTED]"`)) {
		t.Errorf("unexpected json: %s", data)
	}
}

func TestRedactsInSlog(t *testing.T) {
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&buf, nil), slog.NewTextHandler(&buf, nil)} {
		log := slog.New(h)
		v := Value(plain)
		log.Info("msg", "token", v, slog.Any("ptr", &v), slog.Any("holder", holder{Token: v}))
	}
	if strings.Contains(buf.String(), plain) {
		t.Fatalf("slog leaked the plaintext: %s", buf.String())
	}
	if !strings.Contains(buf.String(), Redacted) {
		t.Errorf("expected redacted marker in %s", buf.String())
	}
}

func TestUnmarshalAndReveal(t *testing.T) {
	var h struct {
		A Value
		B Value
	}
	if err := json.Unmarshal([]byte(`{"A":"`+plain+`","B":null}`), &h); err != nil {
		t.Fatal(err)
	}
	if h.A.Reveal() != plain || !h.B.IsZero() || h.A.IsZero() {
		t.Errorf("got A=%q B=%q", h.A.Reveal(), h.B.Reveal())
	}
	if err := json.Unmarshal([]byte(`{"A":5}`), &h); err == nil {
		t.Error("expected an error for a non-string")
	}
}
