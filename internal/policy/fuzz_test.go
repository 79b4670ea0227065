package policy

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzArgsValue: whatever a caller sends as arguments converts within the
// bounds or fails with an ArgsError, never panics, and an expression that
// reads every value of the result evaluates or fails cleanly.
func FuzzArgsValue(f *testing.F) {
	for _, seed := range []string{``, `null`, `{}`, `{"a":1}`, `{"a":[1,2.5,"x",null,true,{"b":-1e400}]}`, `[1,2]`, `"s"`,
		`{"a":1,"a":2}`, `{"\u0061":1,"a":2}`, `{"a":"\"}]"}`, `[[[[[[[[[[[[]]]]]]]]]]]]`, `123456789012345678901234567890`, `{`} {
		f.Add([]byte(seed))
	}
	walk, err := Compile(`string(args).size() >= 0 || true`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := argsValue(data)
		if err != nil {
			if !errors.Is(err, ErrArgs) {
				t.Fatalf("%v: not an ArgsError", err)
			}
			return
		}
		if v == nil {
			t.Fatal("no value and no error")
		}
		if len(data) > 0 && json.Valid(data) {
			_, _ = walk.Eval(t.Context(), &Vars{Args: data})
		}
	})
}
