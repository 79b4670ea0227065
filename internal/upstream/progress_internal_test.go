package upstream

import (
	"encoding/json"
	"testing"
)

// Whatever params a server sends as progress, the lookup finds a call only
// for the exact token that call registered, and never panics.
func FuzzProgressCall(f *testing.F) {
	const tok = "mux-p-TOKEN"
	for _, seed := range []string{
		`{"progressToken":"mux-p-TOKEN","progress":1}`,
		`{"progressToken":"mux-p-1"}`,
		`{"progressToken":1}`,
		`{"progressToken":null}`,
		`{"progressToken":"mux-p-TOKEN","progressToken":"x"}`,
		`{"progressToken":"mux-p-TOK\u0045N"}`,
		`[[[[[[`,
		``,
	} {
		f.Add([]byte(seed))
	}
	var t progressCalls
	r := &callRoute{token: tok}
	defer t.bind(r)()
	f.Fuzz(func(tt *testing.T, params []byte) {
		got := t.call(params)
		if got == nil {
			return
		}
		var p struct {
			Token string `json:"progressToken"`
		}
		if got != r || json.Unmarshal(params, &p) != nil || p.Token != tok {
			tt.Fatalf("%q found a call", params)
		}
	})
}

// A call's end drops only its own registration: a later call that holds the
// same token keeps it.
func TestProgressUnbindKeepsNewer(t *testing.T) {
	var calls progressCalls
	first := &callRoute{token: "t"}
	unbind := calls.bind(first)
	second := &callRoute{token: "t"}
	defer calls.bind(second)()
	unbind()
	if got := calls.call(json.RawMessage(`{"progressToken":"t"}`)); got != second {
		t.Fatal("ending the first call dropped the second's token")
	}
}
