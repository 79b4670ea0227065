package callpath

// Multi-round-trip requests (2026-07-28): what both eras read of an
// upstream's input_required, and a legacy client's live fulfilment of it
// (the 2026-07-28 bridges are package modern's).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/mcp-mux/mcp-mux/internal/telemetry"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

const (
	maxInputRounds = 8  // live fulfilment rounds for a legacy client
	MaxInputs      = 32 // input requests one call may hold
)

// InputRequired is the part of an input_required result mcp-mux reads.
type InputRequired struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// InputRequest is one entry of inputRequests.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// AsInputRequired reports whether an upstream result asks for input: a
// 2026-07-28 input_required, or a legacy server's second round (its SDK
// fulfils one round live, then returns the next inputRequests as they are).
func AsInputRequired(raw json.RawMessage) (*InputRequired, bool) {
	if !bytes.Contains(raw, []byte(`"inputRequests"`)) {
		return nil, false
	}
	var ir InputRequired
	if json.Unmarshal(raw, &ir) != nil || ir.InputRequests == nil ||
		(ir.ResultType != "" && ir.ResultType != "input_required") {
		return nil, false
	}
	return &ir, true
}

// RetryParams returns params with the client's answers and the state to echo.
func RetryParams(params, responses json.RawMessage, state string) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	if len(responses) > 0 {
		p["inputResponses"] = responses
	} else {
		delete(p, "inputResponses")
	}
	if state != "" {
		p["requestState"], _ = json.Marshal(state)
	} else {
		delete(p, "requestState")
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// fulfil serves an upstream's input_required for a legacy client: it asks
// the client's session live, then retries with the answers.
func fulfil(ctx context.Context, k Sink, params, raw json.RawMessage, send SendFunc) (json.RawMessage, error) {
	for round := 0; ; round++ {
		ir, ok := AsInputRequired(raw)
		if !ok {
			return raw, nil
		}
		if round == maxInputRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the server asked for input more than %d times", maxInputRounds)}
		}
		if len(ir.InputRequests) > MaxInputs {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the server asked for more than %d inputs at once", MaxInputs)}
		}
		telemetry.Event(ctx, "mcp_mux.input_required", attribute.Int("mcp_mux.round", round+1), attribute.Int("mcp_mux.inputs", len(ir.InputRequests)))
		responses := make(map[string]json.RawMessage, len(ir.InputRequests))
		for key, rr := range ir.InputRequests {
			var req InputRequest
			if json.Unmarshal(rr, &req) != nil || req.Method == "" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the server sent a malformed input request %q", key)}
			}
			res, err := k.Request(ctx, req.Method, req.Params)
			if err != nil {
				return nil, fmt.Errorf("asking the client for %s: %w", req.Method, err)
			}
			responses[key] = res
		}
		b, _ := json.Marshal(responses)
		var err error
		if raw, err = send(ctx, RetryParams(params, b, ir.RequestState)); err != nil {
			return nil, err
		}
	}
}
