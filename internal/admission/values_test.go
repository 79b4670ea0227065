package admission

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

func TestCheckValues(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name, body, field string
	}{
		{"plain call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_b","arguments":{"name":"` + long(5000) + `"}}}`, ""},
		{"long id", `{"jsonrpc":"2.0","id":"` + long(200) + `","method":"ping"}`, "id"},
		{"long numeric id", `{"jsonrpc":"2.0","id":` + strings.Repeat("9", 200) + `,"method":"ping"}`, "id"},
		{"folded id", `{"jsonrpc":"2.0","Id":"` + long(200) + `","method":"ping"}`, "id"},
		{"folded params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"` + long(129) + `"}}`, "params.name"},
		{"dotless i is not i", `{"jsonrpc":"2.0","ıd":"` + long(200) + `","method":"ping"}`, ""},
		{"escaped id", `{"jsonrpc":"2.0","\u0069d":"` + long(200) + `","method":"ping"}`, "id"},
		{"second id", `{"jsonrpc":"2.0","id":1,"Id":"` + long(200) + `","method":"ping"}`, "id"},
		{"long name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + long(129) + `"}}`, "params.name"},
		{"name at bound", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + long(128) + `"}}`, ""},
		{"escaped name counts decoded", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + strings.Repeat(`\u0041`, 100) + `"}}`, ""},
		{"NAME folded", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"NAME":"` + long(300) + `"}}`, "params.name"},
		{"uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + long(bounds.URI+1) + `"}}`, "params.uri"},
		{"cursor", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"` + long(bounds.Cursor+1) + `"}}`, "params.cursor"},
		{"ref", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"` + long(129) + `"}}}`, "params.ref.name"},
		{"progress token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"` + long(200) + `"}}}`, "params._meta.progressToken"},
		{"cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + long(200) + `"}}`, "params.requestId"},
		{"progress notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"` + long(200) + `","progress":1}}`, "params.progressToken"},
		{"braces in strings", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"q":"}]\"{"},"name":"` + long(129) + `"}}`, "params.name"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"` + long(200) + `","method":"ping"}]`, "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh, err := wire.Scan([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			verr := CheckValues([]byte(tc.body), sh)
			switch {
			case tc.field == "" && verr != nil:
				t.Fatalf("refused: %v", verr)
			case tc.field != "" && verr == nil:
				t.Fatalf("accepted; want %s refused", tc.field)
			case tc.field != "" && verr.Field != tc.field:
				t.Fatalf("refused %s, want %s", verr.Field, tc.field)
			case verr != nil && strings.Contains(verr.Error(), "xxxxxxxx"):
				t.Fatalf("the error echoes the value: %.80s", verr.Error())
			}
		})
	}
}

// FuzzCheckValues holds CheckValues to what encoding/json (case-insensitive,
// the last duplicate wins) decodes: a message it accepts never decodes to a
// value past its bound.
func FuzzCheckValues(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1}}}`)
	f.Add(`{"ID":"x","Params":{"NAME":"y","Ref":{"uri":"z"}}}`)
	f.Add(`{"\u0069d":"x","paramſ":{"ſ":1}}`)
	f.Fuzz(func(t *testing.T, body string) {
		b := []byte(body)
		sh, err := wire.Scan(b)
		if err != nil || sh.Batch {
			return
		}
		if CheckValues(b, sh) != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name      string          `json:"name"`
				URI       string          `json:"uri"`
				Cursor    string          `json:"cursor"`
				RequestID json.RawMessage `json:"requestId"`
				Ref       struct {
					Name string `json:"name"`
					URI  string `json:"uri"`
				} `json:"ref"`
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &m) != nil {
			return
		}
		p := m.Params
		for _, c := range []struct {
			n, max int
			what   string
		}{
			{len(m.ID), bounds.ID, "id"}, {len(p.Name), bounds.Name, "name"}, {len(p.URI), bounds.URI, "uri"},
			{len(p.Cursor), bounds.Cursor, "cursor"}, {len(p.RequestID), bounds.ID, "requestId"},
			{len(p.Ref.Name), bounds.Name, "ref.name"}, {len(p.Ref.URI), bounds.URI, "ref.uri"},
			{len(p.Meta.ProgressToken), bounds.ProgressToken, "progressToken"},
		} {
			if c.n > c.max {
				t.Fatalf("accepted a %s of %d bytes (bound %d)", c.what, c.n, c.max)
			}
		}
	})
}
