package modern

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// Multi-round-trip requests (2026-07-28) across eras.
//
// tools/call, prompts/get and resources/read may need input from the client
// (elicitation, sampling, roots). Each era asks differently: a legacy
// server sends a request on its session while the call runs; a 2026-07-28
// server answers input_required and expects a retry. mcp-mux bridges every
// combination:
//
//   - modern client, modern upstream: input_required passes through, its
//     requestState sealed in mcp-mux's envelope (state.go); the retry
//     is unsealed and goes back upstream with the client's answers.
//   - legacy client, modern upstream: fulfil asks the client's session the
//     live requests, then retries upstream, for up to maxInputRounds rounds.
//   - modern client, legacy upstream: the call runs parked (parkedCall);
//     requests the upstream sends become input_required for the client, the
//     upstream call waits with a deadline until the retry brings the
//     answers. The retry's state names the parked call and its replica.
//     While parked the call holds no calls-in-flight slot of the limits
//     rules (it counts against inbound.max_parked_calls instead); the retry
//     takes its slots again, and a retry the limits refuse ends the call.
//
// A client is never asked for input it did not declare a capability for:
// the upstream gets an error instead, and an input_required whose every
// request needs an undeclared capability is -32021.

const (
	gatherQuiet = 20 * time.Millisecond  // requests sent together arrive within this
	gatherMax   = 250 * time.Millisecond // … and are never held back longer
)

// codeMissingCapability is MissingRequiredClientCapabilityError.
const codeMissingCapability = -32021

// mrtrRetry is a modern client's retry of an upstream's input_required:
// the answers and the upstream's own (unsealed) state.
type mrtrRetry struct {
	responses json.RawMessage
	state     string
}

// apply puts the retry into the params going upstream; nil leaves them.
func (r *mrtrRetry) apply(params json.RawMessage) json.RawMessage {
	if r == nil {
		return params
	}
	return callpath.RetryParams(params, r.responses, r.state)
}

// sealInputRequired turns an upstream's input_required into the client's:
// requests the client cannot serve are dropped, the state is sealed.
func (s *bridges) sealInputRequired(st *callpath.Session, server, target string, ir *callpath.InputRequired) (json.RawMessage, error) {
	reqs := make(map[string]json.RawMessage, len(ir.InputRequests))
	for key, rr := range ir.InputRequests {
		var req callpath.InputRequest
		if json.Unmarshal(rr, &req) == nil && st.Supports(req.Method) {
			reqs[key] = rr
		}
	}
	if len(reqs) == 0 {
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: "the server needs input the client declared no capability for"}
	}
	return inputRequiredResult(reqs, s.rt.Load().States.SealState(seal.State{Caller: st.User, Server: server, Target: target, Upstream: ir.RequestState})), nil
}

func inputRequiredResult(reqs map[string]json.RawMessage, state string) json.RawMessage {
	b, _ := json.Marshal(struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}{"input_required", reqs, state})
	return b
}

// bridges runs the calls of 2026-07-28 clients that need client input:
// bridged to a legacy upstream (parked between rounds), or passing a
// 2026-07-28 upstream's input_required on under a sealed requestState.
type bridges struct {
	log     hclog.Logger
	rt      *atomic.Pointer[callpath.Runtime]
	calls   *callpath.Router
	panics  *panicguard.Guard
	parked  parkTable // calls parked between rounds
	replica string    // this process, in requestStates of parked calls
	// elsewhere serves a retry of a call parked on another replica there
	// (Options.Elsewhere); nil: such a retry is refused.
	elsewhere func(w http.ResponseWriter, r *http.Request, body []byte, replica string)
}

// bounds returns the caps and shares of the config applied now.
func (s *bridges) bounds() admission.Bounds { return admission.Of(&s.rt.Load().Config.Inbound) }

// parkTable holds bridged calls between a modern client's rounds, within
// inbound.max_parked_calls and each caller's share of it (package admission).
type parkTable struct {
	mu     sync.Mutex
	m      map[string]*parkedCall
	users  admission.Counts // parked calls by user
	closed bool             // closeAll ran: nothing parks any more
	ttl    time.Duration    // how long a call stays parked; 0: stateTTL
}

// parkedCall is a modern client's call to a legacy upstream. It runs on
// its own context, so it survives the request that started it while the
// client answers; each round's request attaches its stream.
type parkedCall struct {
	id     string // set when first parked (park)
	server string
	target string
	user   string
	limits callpath.LimitHold // its limits admissions: no slot held while parked
	cancel context.CancelFunc
	done   chan struct{}
	res    mcp.Result
	err    error
	timer  *time.Timer // the park deadline while no round is attached

	signal chan struct{} // cap 1: an input request arrived
	seq    atomic.Uint64

	mu     sync.Mutex
	round  callpath.Sink   // the latest round's: its stream, its session's capabilities
	ctx    context.Context // the attached round's; nil between rounds
	inputs map[string]*pendingInput
	held   []heldNote // notifications that arrived between rounds
}

// heldNote is a notification kept for a parked call's next round.
type heldNote struct {
	method string
	params json.RawMessage
}

// maxHeld bounds the notifications a parked call keeps between rounds.
const maxHeld = 64

type pendingInput struct {
	method string
	params json.RawMessage
	sent   bool
	answer chan json.RawMessage
}

// bridgeSink is a parked call's sink: notifications ride the attached
// round's stream, requests wait for the client's next retry.
type bridgeSink struct{ pc *parkedCall }

// Session returns the session of the latest round.
func (b bridgeSink) Session() *callpath.Session {
	b.pc.mu.Lock()
	defer b.pc.mu.Unlock()
	return b.pc.round.Session()
}

// Notify sends a notification on the attached round's stream, or holds
// it for the next round.
func (b bridgeSink) Notify(method string, params json.RawMessage) {
	b.pc.mu.Lock()
	round, ctx := b.pc.round, b.pc.ctx
	if ctx == nil || ctx.Err() != nil {
		// Between rounds (the client is answering): the next round's stream
		// carries it, progress included.
		if len(b.pc.held) < maxHeld {
			b.pc.held = append(b.pc.held, heldNote{method: method, params: params})
		}
		b.pc.mu.Unlock()
		return
	}
	b.pc.mu.Unlock()
	round.Notify(method, params)
}

// Request queues a request for the client's next retry and waits for its
// answer.
func (b bridgeSink) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	pc := b.pc
	if method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	pc.mu.Lock()
	if !pc.round.Session().Supports(method) {
		pc.mu.Unlock()
		return nil, &wire.Error{Code: codeMissingCapability, Message: fmt.Sprintf("the client did not declare the capability %s needs", method)}
	}
	if len(pc.inputs) >= callpath.MaxInputs {
		pc.mu.Unlock()
		return nil, &wire.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("more than %d requests to the client are pending", callpath.MaxInputs)}
	}
	key := "mux-" + strconv.FormatUint(pc.seq.Add(1), 10)
	in := &pendingInput{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	pc.inputs[key] = in
	pc.mu.Unlock()
	select {
	case pc.signal <- struct{}{}:
	default:
	}
	defer func() {
		pc.mu.Lock()
		delete(pc.inputs, key)
		pc.mu.Unlock()
	}()
	select {
	case res := <-in.answer:
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startParked runs call as a bridged call to server of the request whose
// first round (handled with ctx) is round; the request's era e gets the
// bridge as its sink.
func (s *bridges) startParked(ctx context.Context, round callpath.Sink, e *Era, server, target string, call func(context.Context) (mcp.Result, error)) *parkedCall {
	pc := &parkedCall{server: server, target: target, user: round.Session().User, done: make(chan struct{}),
		signal: make(chan struct{}, 1), inputs: map[string]*pendingInput{}, round: round, ctx: ctx}
	cctx, cancel := context.WithCancel(callpath.WithLimitHold(context.WithoutCancel(ctx), &pc.limits))
	pc.cancel = cancel
	e.bridge = bridgeSink{pc}
	go func() {
		defer close(pc.done)
		defer cancel()
		defer s.panics.Catch(panicguard.Bridge, &pc.err) // internal/panicguard
		pc.res, pc.err = call(cctx)
	}()
	return pc
}

// await serves one round of a bridged call, whose stream is round's: its
// result, or the input requests that arrived, sealed into an
// input_required result.
func (s *bridges) await(ctx context.Context, round callpath.Sink, pc *parkedCall) (mcp.Result, error) {
	st := round.Session()
	if pc.id != "" {
		telemetry.Event(ctx, "mcp_mux.call.resumed", telemetry.ServerAttr.String(pc.server))
	}
	if pc.attach(ctx, round) {
		pc.poke()
	}
	defer pc.detach(ctx)
	for {
		select {
		case <-pc.done:
			return s.parkedResult(st, pc)
		case <-ctx.Done():
			pc.cancel()
			return nil, ctx.Err()
		case <-pc.signal:
		}
		if pc.gather() {
			return s.parkedResult(st, pc)
		}
		reqs := pc.pending()
		if len(reqs) == 0 {
			continue // answered or withdrawn meanwhile
		}
		telemetry.Event(ctx, "mcp_mux.call.parked", telemetry.ServerAttr.String(pc.server), attribute.Int("mcp_mux.inputs", len(reqs)))
		return s.parkRound(pc, reqs)
	}
}

// attach makes round (handled with ctx) the call's current round: the
// notifications held between rounds go out on it first, in order. It
// reports whether requests the client has not been sent are waiting.
func (pc *parkedCall) attach(ctx context.Context, round callpath.Sink) (resend bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.round, pc.ctx = round, ctx
	for _, n := range pc.held { // in order, before anything newer
		round.Notify(n.method, n.params)
	}
	pc.held = nil
	for _, in := range pc.inputs {
		if !in.sent {
			resend = true
		}
	}
	return resend
}

// detach ends the round handled with ctx: its stream ends with its answer.
func (pc *parkedCall) detach(ctx context.Context) {
	pc.mu.Lock()
	if pc.ctx == ctx {
		pc.ctx = nil
	}
	pc.mu.Unlock()
}

// poke tells await that input requests are waiting.
func (pc *parkedCall) poke() {
	select {
	case pc.signal <- struct{}{}:
	default:
	}
}

// gather waits for the requests the server sends together (they arrive
// within gatherQuiet of each other, and never later than gatherMax); it
// reports whether the call finished meanwhile.
func (pc *parkedCall) gather() bool {
	quiet, deadline := time.NewTimer(gatherQuiet), time.NewTimer(gatherMax)
	defer quiet.Stop()
	defer deadline.Stop()
	for {
		select {
		case <-pc.done:
			return true
		case <-pc.signal:
			quiet.Reset(gatherQuiet)
		case <-quiet.C:
			return false
		case <-deadline.C:
			return false
		}
	}
}

// pending returns the call's input requests, each marked sent.
func (pc *parkedCall) pending() map[string]json.RawMessage {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	reqs := make(map[string]json.RawMessage)
	for key, in := range pc.inputs {
		b, _ := json.Marshal(callpath.InputRequest{Method: in.method, Params: in.params})
		reqs[key] = b
		in.sent = true
	}
	return reqs
}

// parkRound parks pc for the client's retry and answers this round with
// the input requests reqs and a requestState naming the parked call. The
// call's calls-in-flight slots are returned while it waits (resume takes
// them again).
func (s *bridges) parkRound(pc *parkedCall, reqs map[string]json.RawMessage) (mcp.Result, error) {
	pc.limits.Pause()
	if err := s.parked.park(s, pc, s.bounds().Parked); err != nil {
		pc.cancel()
		return nil, err
	}
	return &mcpwire.RawResult{Raw: inputRequiredResult(reqs, s.rt.Load().States.SealState(seal.State{
		Caller: pc.user, Server: pc.server, Target: pc.target, Park: pc.id, Replica: s.replica}))}, nil
}

// parkedResult is a finished bridged call's result for st.
func (s *bridges) parkedResult(st *callpath.Session, pc *parkedCall) (mcp.Result, error) {
	if pc.err != nil {
		return nil, pc.err
	}
	if rr, ok := pc.res.(*mcpwire.RawResult); ok {
		if ir, ok := callpath.AsInputRequired(rr.Raw); ok {
			raw, err := s.sealInputRequired(st, pc.server, pc.target, ir)
			if err != nil {
				return nil, err
			}
			return &mcpwire.RawResult{Raw: raw}, nil
		}
	}
	return pc.res, nil
}

// park keeps pc for its client's retry, until its ttl (stateTTL), unless b's cap or
// the caller's share of it is full: then the client is told which.
func (t *parkTable) park(s *bridges, pc *parkedCall, b admission.Bound) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed { // shutting down: no retry would find it
		return callpath.ErrClosing
	}
	if t.m == nil {
		t.m = make(map[string]*parkedCall)
	}
	switch b.Refusal(len(t.m), t.users[pc.user]) {
	case "":
	case b.ShareKey:
		return &jsonrpc.Error{Code: admission.CodeLimit, Message: fmt.Sprintf(
			"this caller already has %d calls waiting for client input, the most one caller may have (%s); answer or cancel one, or try again later", b.Share, b.ShareKey)}
	default:
		return &jsonrpc.Error{Code: admission.CodeLimit, Message: fmt.Sprintf(
			"more than %d calls are waiting for client input (%s); try again later", b.Limit, b.Key)}
	}
	if pc.id == "" { // named when first parked: most calls never are
		var idb [16]byte
		_, _ = rand.Read(idb[:])
		pc.id = hex.EncodeToString(idb[:])
	}
	t.m[pc.id] = pc
	t.users.Add(pc.user)
	ttl := t.ttl
	if ttl <= 0 {
		ttl = stateTTL
	}
	pc.timer = time.AfterFunc(ttl, func() {
		if t.take(pc.id) == pc {
			s.log.Debug("parked call expired", "server", pc.server)
			pc.cancel()
		}
	})
	return nil
}

// take removes and returns the parked call id, or nil.
func (t *parkTable) take(id string) *parkedCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc := t.m[id]
	if pc != nil {
		delete(t.m, id)
		t.users.Done(pc.user)
		pc.timer.Stop()
	}
	return pc
}

// closeAll cancels every parked call and refuses to park more (shutdown):
// a call that asks for input later is cancelled by await.
func (t *parkTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for id, pc := range t.m {
		pc.timer.Stop()
		pc.cancel()
		delete(t.m, id)
	}
	t.users = nil
}

// answer hands the client's responses to the requests waiting for them.
// Responses to keys nobody waits for are ignored.
func (pc *parkedCall) answer(responses map[string]json.RawMessage) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for key, in := range pc.inputs {
		if res, ok := responses[key]; ok {
			in.answer <- res
			delete(pc.inputs, key)
		} else {
			in.sent = false // unanswered: ask again
		}
	}
}

// modernCall serves a 2026-07-28 tools/call, prompts/get or resources/read
// of st, whose stream is round's: a retry is unsealed and resumed, a new
// call runs bridged.
func (s *bridges) modernCall(ctx context.Context, st *callpath.Session, e *Era, round callpath.Sink, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	responses, state := retryOf(req)
	server, target := s.ownerOf(method, req.GetParams())
	if state != "" {
		env, err := s.rt.Load().States.OpenState(state, st.User, server, target)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: " + err.Error()}
		}
		if env.Park != "" {
			pc := s.parked.take(env.Park)
			if pc == nil {
				if env.Replica != s.replica {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the call this requestState continues waits on another mcp-mux replica; send retries to the replica that answered, or call again without requestState"}
				}
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the call this requestState continues is no longer waiting (expired, cancelled or already answered); call again without requestState"}
			}
			if res, refused, err := resume(ctx, method, pc); refused {
				return res, err
			}
			m := make(map[string]json.RawMessage, len(responses))
			for k, v := range responses {
				m[k] = v
			}
			pc.answer(m)
			return s.await(ctx, round, pc)
		}
		b, _ := json.Marshal(responses)
		e.again = &mrtrRetry{responses: b, state: env.Upstream}
	}
	pc := s.startParked(ctx, round, e, server, target, func(ctx context.Context) (mcp.Result, error) {
		return s.calls.Dispatch(ctx, st, e, method, req, next)
	})
	return s.await(ctx, round, pc)
}

// resume takes the calls-in-flight slots of the parked call pc again for
// its client's retry (a request of method). Refused by a limits rule, the
// call ends (cancelled upstream, as a call refused at its start never
// began) and the refusal is the retry's answer, as method gets it.
func resume(ctx context.Context, method string, pc *parkedCall) (res mcp.Result, refused bool, err error) {
	d := pc.limits.Resume(ctx)
	if d == nil {
		return nil, false, nil
	}
	pc.cancel()
	raw, err := callpath.LimitRefusal(method, d)
	if err != nil {
		return nil, true, err
	}
	return &mcpwire.RawResult{Raw: raw}, true, nil
}

// forwardRetry sends a retry whose requestState names a call parked on
// another replica to that replica (Options.Elsewhere), and reports
// whether it did.
func (s *bridges) forwardRetry(w http.ResponseWriter, r *http.Request, body []byte, m *wire.Message) bool {
	if s.elsewhere == nil {
		return false
	}
	switch m.Method {
	case "tools/call", "prompts/get", "resources/read":
	default:
		return false
	}
	var p struct {
		RequestState string `json:"requestState"`
	}
	if !bytes.Contains(m.Params, []byte(`"requestState"`)) || json.Unmarshal(m.Params, &p) != nil || p.RequestState == "" {
		return false
	}
	_, replica, ok := s.rt.Load().States.ParkedAt(p.RequestState)
	if !ok || replica == "" || replica == s.replica {
		return false
	}
	s.elsewhere(w, r, body, replica)
	return true
}

// inputResponsesHeader carries a 2026-07-28 request's inputResponses, as
// the client wrote them, from serveModern to modernCall: the SDK decodes
// them into its result types, which drop fields they do not know and
// re-encode the rest. Like requestIDHeader it is set by mcp-mux only.
const inputResponsesHeader = "Mcp-Mux-Internal-Input-Responses"

// rawInputResponses returns the inputResponses member of a request's
// params exactly as sent, or nil.
func rawInputResponses(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"inputResponses"`)) {
		return nil
	}
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.InputResponses) == 0 || p.InputResponses[0] != '{' {
		return nil
	}
	return p.InputResponses
}

// retryOf returns a request's inputResponses (raw, by key: the client's
// bytes when serveModern saw them) and requestState.
func retryOf(req mcp.Request) (map[string]json.RawMessage, string) {
	responses, state := paramsRetry(req.GetParams())
	if raw := callpath.HeaderOf(req).Get(inputResponsesHeader); raw != "" {
		var out map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &out) == nil {
			return out, state
		}
	}
	out := make(map[string]json.RawMessage, len(responses))
	for k, v := range responses {
		if b, err := json.Marshal(v); err == nil {
			out[k] = b
		}
	}
	return out, state
}

// paramsRetry returns the inputResponses (as the SDK decoded them) and
// requestState of a tools/call, prompts/get or resources/read.
func paramsRetry(p mcp.Params) (mcp.InputResponseMap, string) {
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		return p.InputResponses, p.RequestState
	case *mcp.GetPromptParams:
		return p.InputResponses, p.RequestState
	case *mcp.ReadResourceParams:
		return p.InputResponses, p.RequestState
	}
	return nil, ""
}

// ownerOf names the server a call goes to ("" for mcp-mux's own tools)
// and its target: the method and the visible name or URI.
func (s *bridges) ownerOf(method string, p mcp.Params) (server, target string) {
	cat := s.rt.Load().Catalog.Load()
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		target, server = p.Name, routeServer(cat.Lookup(p.Name))
	case *mcp.GetPromptParams:
		target = p.Name
		if r := cat.Prompt(p.Name); r != nil && r.Server != nil {
			server = r.Server.Name
		}
	case *mcp.ReadResourceParams:
		target = p.URI
		if b := cat.ResourceOwner(p.URI); b != nil {
			server = b.Name
		}
	}
	return server, method + " " + target
}

// routeServer names the server of route r; "" without one (built-in
// tools have none).
func routeServer(r *callpath.Route) string {
	if r == nil || r.Server == nil {
		return ""
	}
	return r.Server.Name
}
