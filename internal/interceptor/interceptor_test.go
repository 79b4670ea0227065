package interceptor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/interceptor"
)

func TestBuildSkipsUnknownNames(t *testing.T) {
	ics, problems := interceptor.Build([]string{"my_package.mcp.auth:build_auth_interceptor", "audit", "nope"}, interceptor.Options{})
	if len(ics) != 1 {
		t.Fatalf("built %d interceptors, want 1 (audit, the call log)", len(ics))
	}
	if len(problems) != 2 || !strings.Contains(problems[0].Error(), "my_package.mcp.auth:build_auth_interceptor") || !strings.Contains(problems[1].Error(), `"nope"`) {
		t.Fatalf("problems = %v", problems)
	}
}

func TestChainOrderFirstIsOutermost(t *testing.T) {
	var order []string
	mk := func(name string) interceptor.Interceptor {
		return func(ctx context.Context, c *interceptor.Call, next interceptor.Next) (json.RawMessage, error) {
			order = append(order, name+">")
			res, err := next(ctx)
			order = append(order, "<"+name)
			return res, err
		}
	}
	_, err := interceptor.Chain(context.Background(), []interceptor.Interceptor{mk("a"), mk("b")}, &interceptor.Call{},
		func(context.Context) (json.RawMessage, error) {
			order = append(order, "call")
			return json.RawMessage(`{}`), nil
		})
	if err != nil || strings.Join(order, " ") != "a> b> call <b <a" {
		t.Fatalf("order %v err %v", order, err)
	}
}
