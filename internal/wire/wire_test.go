package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeClassifies(t *testing.T) {
	cases := []struct {
		in                    string
		call, notif, response bool
		err                   bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, true, false, false, false},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, false, true, false, false},
		{`{"jsonrpc":"2.0","id":"a","result":{"content":[]}}`, false, false, true, false},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}`, false, false, false, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false, false, false, true}, // batches go to the SDK
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, false, false, false, true},
		{`not json`, false, false, false, true},
		{``, false, false, false, true},
	}
	for _, c := range cases {
		var m Message
		err := Decode([]byte(c.in), &m)
		if (err != nil) != c.err {
			t.Errorf("%s: err = %v", c.in, err)
			continue
		}
		if err == nil && (m.IsCall() != c.call || m.IsNotification() != c.notif || m.IsResponse() != c.response) {
			t.Errorf("%s: call=%v notif=%v response=%v", c.in, m.IsCall(), m.IsNotification(), m.IsResponse())
		}
	}
}

func TestEncodersProduceValidJSON(t *testing.T) {
	id := json.RawMessage(`"mux-1"`)
	name := "we\"ird\n\u2028name"
	for _, b := range [][]byte{
		AppendRequest(nil, id, "tools/call", AppendCallParams(nil, name, json.RawMessage(`{"a":1}`), json.RawMessage(`{"k":2}`))),
		AppendCallParams(nil, name, nil, nil),
		AppendResult(nil, id, json.RawMessage(`{"content":[]}`)),
		AppendError(nil, nil, -32602, `unknown tool "x"`, nil),
		AppendError(nil, id, -32602, "<b> & \u2028", json.RawMessage(`{"k":[1]}`)),
		AppendNotification(nil, "notifications/progress", json.RawMessage(`{"progress":1}`)),
		ToolError("Error: \"quoted\"\nline"),
	} {
		if !json.Valid(b) {
			t.Errorf("invalid JSON: %s", b)
		}
	}
	var p CallParams
	if err := DecodeCallParams(AppendCallParams(nil, name, nil, nil), &p); err != nil || p.Name != name || string(p.Arguments) != "{}" {
		t.Errorf("round trip: %+v %v", p, err)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(ToolError("a\"b"), &r); err != nil || !r.IsError || r.Content[0].Text != `a"b` {
		t.Errorf("ToolError: %+v %v", r, err)
	}
}

// FuzzDecode: the envelope decoder sees untrusted request bodies first.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","method":"m"}`,
		`{"jsonrpc":"2.0","id":{},"method":1}`,
		`[1,2]`, `{`, `{"jsonrpc":"2.0","id":1e999}`,
		// Deep nesting: refused with ErrTooDeep, never a stack overflow.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + nested("[", "]", MaxDepth, "") + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":` + nested(`{"a":`, "}", 200_000, "0") + `}}`,
		`{"jsonrpc":"2.0","id":"x","result":` + strings.Repeat("[", 1_000_000) + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":["\"` + nested("[", "]", MaxDepth, "") + `"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		sh, scanErr := Scan(data)
		err := Decode(data, &m)
		if errors.Is(scanErr, ErrTooDeep) != errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrNotEnvelope) {
			t.Fatalf("Scan says %v, Decode says %v", scanErr, err)
		}
		if scanErr == nil && json.Valid(data) {
			if d := depthOf(t, data); d > MaxDepth {
				t.Fatalf("Scan accepted depth %d", d)
			}
			if sh.Batch {
				var arr []json.RawMessage
				if json.Unmarshal(data, &arr) == nil && len(arr) != sh.Len {
					t.Fatalf("Scan counted %d batch elements, encoding/json %d", sh.Len, len(arr))
				}
			}
		}
		if err != nil {
			return
		}
		if m.JSONRPC != "2.0" {
			t.Fatalf("accepted version %q", m.JSONRPC)
		}
		if m.IsCall() && !json.Valid(AppendResult(nil, m.ID, json.RawMessage(`{}`))) {
			t.Fatalf("response to id %s is not valid JSON", m.ID)
		}
		var p CallParams
		if m.Method == "tools/call" && DecodeCallParams(m.Params, &p) == nil {
			if !json.Valid(AppendCallParams(nil, p.Name, p.Arguments, p.Meta)) && json.Valid(m.Params) {
				t.Fatalf("re-encoded params invalid: %s", m.Params)
			}
		}
	})
}

// depthOf is the nesting depth of valid JSON, by encoding/json's tokenizer.
func depthOf(t *testing.T, data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
