package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// call is the Vars of a tools/call of "bank_transfer" at "bank" by alice.
func call(args string) *Vars {
	a := DefaultAnnotations()
	a.Title = "Transfer"
	return &Vars{Caller: Caller{User: "alice", Profile: "finance"}, Method: ToolCall, Server: "bank", Tool: "bank_transfer",
		Args: json.RawMessage(args), Annotations: &a}
}

// TestExprOnArguments: conditions over argument values — numbers (int and
// double), strings, nested fields, missing fields, lists — and the other
// variables, as true, false or an error (which a decision takes as a
// denial).
func TestExprOnArguments(t *testing.T) {
	const transfer = `{"amount": 1500, "rate": 0.25, "currency": "EUR", "to": {"iban": "DE89370400440532013000", "country": "DE"},
		"tags": ["urgent", "payroll"], "memo": null, "big": 12345678901234567890, "dry_run": false}`
	tests := []struct {
		expr string
		args string
		want bool
		err  string // a substring of the error; "" for none
	}{
		{expr: `args.amount > 1000`, args: transfer, want: true},
		{expr: `args.amount > 1000`, args: `{"amount": 999}`, want: false},
		{expr: `args.amount == 1500`, args: transfer, want: true},
		{expr: `args.amount + 1 == 1501`, args: transfer, want: true}, // an integer is an int
		{expr: `args.rate < 0.5`, args: transfer, want: true},
		{expr: `args.amount > 1000.5`, args: transfer, want: true}, // int against double
		{expr: `args.big > 1.0e19`, args: transfer, want: true},    // past int64: a double
		{expr: `args.amount >= 1e3`, args: `{"amount": 1e3}`, want: true},
		{expr: `args.currency == "EUR"`, args: transfer, want: true},
		{expr: `args.currency in ["USD", "GBP"]`, args: transfer, want: false},
		{expr: `args.to.country != "DE"`, args: transfer, want: false},
		{expr: `args.to.iban.startsWith("DE")`, args: transfer, want: true},
		{expr: `args.to.iban.matches("^[A-Z]{2}[0-9]{20}$")`, args: transfer, want: true},
		{expr: `"urgent" in args.tags`, args: transfer, want: true},
		{expr: `args.tags.exists(t, t == "payroll") && size(args.tags) == 2`, args: transfer, want: true},
		{expr: `args.tags.all(t, t.size() < 5)`, args: transfer, want: false},
		{expr: `args.memo == null`, args: transfer, want: true},
		{expr: `args.dry_run`, args: transfer, err: "not bool"}, // compile-time: dyn
		{expr: `args.dry_run == false`, args: transfer, want: true},
		// Missing fields: an error unless the expression tests for them.
		{expr: `args.limit > 10`, args: transfer, err: "no such key"},
		{expr: `has(args.limit) && args.limit > 10`, args: transfer, want: false},
		{expr: `args.?limit.orValue(0) > 10`, args: transfer, want: false},
		{expr: `has(args.to.iban)`, args: transfer, want: true},
		{expr: `args.to.?bic.hasValue()`, args: transfer, want: false},
		{expr: `has(args.x)`, args: ``, want: false}, // no arguments: {}
		{expr: `size(args) == 0`, args: `null`, want: true},
		{expr: `args.amount > 10`, args: `{"amount": "lots"}`, err: "no such overload"},
		// The other variables.
		{expr: `caller.user == "alice" && caller.profile == "finance"`, want: true},
		{expr: `method == "tools/call" && server == "bank" && tool.endsWith("_transfer")`, want: true},
		{expr: `annotations.destructiveHint && !annotations.readOnlyHint && annotations.title == "Transfer"`, want: true},
		{expr: `annotations.openWorldHint && !annotations.idempotentHint`, want: true},
		// Extensions.
		{expr: `args.currency.lowerAscii() == "eur"`, args: transfer, want: true},
		{expr: `sets.intersects(args.tags, ["payroll", "bonus"])`, args: transfer, want: true},
		{expr: `args.tags.distinct().size() == 2`, args: transfer, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			x, err := Compile(tt.expr)
			if err == nil {
				var got bool
				got, err = x.Eval(t.Context(), call(tt.args))
				if err == nil && got != tt.want {
					t.Fatalf("%s over %s = %v, want %v", tt.expr, tt.args, got, tt.want)
				}
			}
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("%s: %v", tt.expr, err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("%s: error %v, want one saying %q", tt.expr, err, tt.err)
			}
		})
	}
}

// TestCompileErrors: what does not compile says why, and where.
func TestCompileErrors(t *testing.T) {
	for expr, want := range map[string]string{
		``:                          "is empty",
		`args.amount >`:             "does not compile: ERROR: <input>:1:14",
		`nosuch == 1`:               "undeclared reference to 'nosuch'",
		`tool`:                      "evaluates to string, not bool",
		`caller.user + 1 == 2`:      "no matching overload",
		strings.Repeat("a", 5000):   "at most 4096",
		"tool == \"\xff\"":          "not valid UTF-8",
		`args.x.filter(y, y > 1)`:   "evaluates to list(dyn), not bool",
		`annotations.foo.bar == 1 `: "", // a dyn member: compiles
	} {
		_, err := Compile(expr)
		if want == "" {
			if err != nil {
				t.Errorf("%.40q: %v", expr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: error %v, want one saying %q", expr, err, want)
		}
	}
}

// TestCostLimit: a pathological expression — comprehensions nested over a
// big list the caller sent — stops at the cost limit, quickly, with
// ErrCostLimit; the same expression over a small list runs.
func TestCostLimit(t *testing.T) {
	x, err := Compile(`args.items.all(a, args.items.all(b, args.items.all(c, a + b + c >= 0)))`)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]int, 5000)
	for i := range items {
		items[i] = i
	}
	big, _ := json.Marshal(map[string]any{"items": items})
	start := time.Now()
	ok, err := x.Eval(t.Context(), &Vars{Args: big})
	if ok || !errors.Is(err, ErrCostLimit) || !strings.Contains(err.Error(), fmt.Sprint(CostLimit)) {
		t.Fatalf("over 5000 items: %v, %v; want ErrCostLimit naming the limit", ok, err)
	}
	t.Logf("stopped by the cost limit after %v", time.Since(start))
	ok, err = x.Eval(t.Context(), &Vars{Args: json.RawMessage(`{"items": [1, 2, 3]}`)})
	if err != nil || !ok {
		t.Fatalf("over 3 items: %v, %v; want true, nil", ok, err)
	}
	// A long string repeated through string functions costs by its length.
	long, _ := json.Marshal(map[string]any{"s": strings.Repeat("x", 200_000), "n": items[:1000]})
	y, err := Compile(`args.n.all(i, args.s.contains("y") == false)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := y.Eval(t.Context(), &Vars{Args: long}); !errors.Is(err, ErrCostLimit) {
		t.Fatalf("contains over a long string 1000 times: %v, want ErrCostLimit", err)
	}
}

// TestRuntimeErrorsQuoteNoValue: a condition that fails on what the
// caller sent says how it failed, never with the value (which CEL's own
// messages quote).
func TestRuntimeErrorsQuoteNoValue(t *testing.T) {
	args := json.RawMessage(`{"s": "sekrit-val(", "l": [1], "i": 987654}`)
	for expr, want := range map[string]string{
		`args[args.s] == 1`:                       "no such key",
		`args.s.matches(args.s)`:                  "error parsing regexp",
		`timestamp(args.s) > timestamp(0)`:        "evaluation error",
		`args.l[args.i] == 1`:                     "index out of bounds",
		`int(args.s) > 1`:                         "type conversion error from 'string' to 'int'",
		`args.s + 1 == 2`:                         "no such overload",
		`args.s.size() / (args.l.size() - 1) > 0`: "division by zero",
	} {
		x, err := Compile(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		_, err = x.Eval(t.Context(), &Vars{Args: args})
		if !errors.Is(err, ErrRuntime) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "sekrit") || strings.Contains(err.Error(), "987654") {
			t.Errorf("%s: %v, want ErrRuntime saying %q and no value", expr, err, want)
		}
	}
}

// TestEvalInterrupted: an evaluation stops when the call's context ends.
func TestEvalInterrupted(t *testing.T) {
	x, err := Compile(`args.items.all(a, a >= 0)`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	big, _ := json.Marshal(map[string]any{"items": make([]int, 1000)})
	if _, err := x.Eval(ctx, &Vars{Args: big}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("a cancelled call: %v, want ErrInterrupted", err)
	}
}

// TestArgsBounds: arguments past a bound fail every expression that reads
// them with an error naming the bound, never a value; one that does not
// read them runs.
func TestArgsBounds(t *testing.T) {
	reads, _ := Compile(`has(args.a)`)
	ignores, _ := Compile(`tool == "t"`)
	deep := strings.Repeat(`{"a":`, MaxArgsDepth+1) + "1" + strings.Repeat("}", MaxArgsDepth+1)
	many := `{"a":[` + strings.Repeat("0,", MaxArgsValues) + `0]}`
	huge := `{"a":"` + strings.Repeat("s", MaxArgsBytes) + `"}`
	for name, args := range map[string]string{
		"deep": deep, "many": many, "huge": huge,
		"duplicate": `{"a": "secret-1", "a": "secret-2"}`, "broken": `{"a": "secret`, "trailing": `{} {}`,
	} {
		v := &Vars{Tool: "t", Args: json.RawMessage(args)}
		_, err := reads.Eval(t.Context(), v)
		var ae *ArgsError
		if !errors.Is(err, ErrArgs) || !errors.As(err, &ae) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v, want an ArgsError that names no value", name, err)
		}
		if ok, err := ignores.Eval(t.Context(), v); !ok || err != nil {
			t.Errorf("%s: an expression that does not read args: %v, %v", name, ok, err)
		}
	}
	// Just within the bounds.
	within := strings.Repeat(`{"a":`, MaxArgsDepth) + "1" + strings.Repeat("}", MaxArgsDepth)
	if ok, err := reads.Eval(t.Context(), &Vars{Args: json.RawMessage(within)}); !ok || err != nil {
		t.Fatalf("%d levels: %v, %v", MaxArgsDepth, ok, err)
	}
}

// TestVarsShared: one call's Vars serve all its expressions, converting
// the arguments once.
func TestVarsShared(t *testing.T) {
	x, _ := Compile(`args.n == 1`)
	v := call(`{"n": 1}`)
	for range 3 {
		if ok, err := x.Eval(t.Context(), v); !ok || err != nil {
			t.Fatalf("%v, %v", ok, err)
		}
	}
	first := v.args
	_, _ = x.Eval(t.Context(), v)
	if v.args != first {
		t.Fatal("the arguments were converted again")
	}
}

func BenchmarkEval(b *testing.B) {
	x, err := Compile(`args.amount > 1000 && args.to.country != "DE"`)
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"amount": 1500, "currency": "EUR", "to": {"iban": "DE89370400440532013000", "country": "DE"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Eval(b.Context(), call(string(args))); err != nil {
			b.Fatal(err)
		}
	}
}
