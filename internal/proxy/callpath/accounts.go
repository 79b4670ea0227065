package callpath

// Connected accounts (DESIGN §2.9): a call to a server where each caller
// connects their own account goes out with that caller's token, and a
// caller who has none — or whose token the server refuses, or who needs
// more scopes — is asked to consent in their own client, in the request
// that needed it. The consent is an input request of mcp-mux's own (a
// URL-mode elicitation/create), served as the caller's era serves an
// upstream's (Era.Fulfil): a 2025-11-25 client is asked live and the call
// goes on once the authorization server sent the browser back; a
// 2026-07-28 client gets an input_required whose sealed requestState
// names the consent, and its retry — on any replica — goes on once the
// consent completed. A client that can show no URL gets JSON-RPC -32042
// with the URL. The engine (discovery, PKCE, the callback, the vault) is
// package accounts, behind Accounts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Accounts is the connected-accounts engine as the call pipeline uses it.
type Accounts interface {
	// Token returns user's access token for server, refreshed when it
	// is about to expire; ok is false when user has none.
	Token(ctx context.Context, user, server string) (tok secret.Value, ok bool, err error)
	// Rejected learns that server refused sent (refusal: its status and
	// challenges) and says what to do: send again with a renewed token,
	// or ask for consent (with the scopes to step up to, if any). An
	// error ends the call (the server refuses even the scopes it asked
	// for).
	Rejected(ctx context.Context, user, server string, sent secret.Value, refusal *upstream.StatusError) (Renewal, error)
	// Start begins user's consent for server (refusal: what the server
	// answered, nil to ask it; stepUp: the scopes to add).
	Start(ctx context.Context, user, server string, refusal *upstream.StatusError, stepUp []string) (*Consent, error)
	// Wait returns once user's consent id completed (nil) or failed, or
	// ctx ended.
	Wait(ctx context.Context, user, id string) error
	// Result reports whether user's consent id completed, without waiting.
	Result(ctx context.Context, user, id string) (done bool, err error)
	// Disconnect forgets user's tokens for server and reports whether
	// there were any.
	Disconnect(ctx context.Context, user, server string) (bool, error)
	// Detected reports whether server, configured with no credentials,
	// turned out to want each caller's account (Detect).
	Detected(server string) bool
	// Detect notes that server answered a call with a Bearer challenge.
	Detect(server string)
}

// Renewal is what Accounts.Rejected asks for.
type Renewal struct {
	Again  bool     // the token was renewed: send again
	StepUp []string // else ask for consent, to these scopes when set
}

// Consent is one started authorization: the URL the user opens.
type Consent struct {
	ID      string // also the elicitationId
	URL     string
	Expires time.Time
}

// ConnectAccountName is the built-in tool that connects (or disconnects)
// the caller's account on a server on demand.
const ConnectAccountName = catalog.ConnectAccountName

const (
	// consentPrefix starts the requestState of mcp-mux's own consent
	// input request; the consent id follows. (A client never sees it: a
	// 2026-07-28 requestState is sealed.)
	consentPrefix = "mcp-mux.consent."
	// consentInput is the key of the consent in inputRequests.
	consentInput = "mcp-mux.connect"
	// maxConsents bounds the consents one call asks for (a first one and
	// a step-up).
	maxConsents = 2
	// retryWait bounds how long a 2026-07-28 retry waits for a consent
	// the client accepted but whose callback has not arrived yet.
	retryWait = 30 * time.Second
	// consentGrace is how long past its expiry a live 2025-11-25 call
	// still waits for a consent (a callback just in time is still being
	// exchanged).
	consentGrace = 30 * time.Second
)

// accountsStage sends a call to a connected-account server with its
// caller's token, and asks for consent when there is none or the server
// refuses it. A server configured with no credentials (Backend.Detect)
// becomes one when it answers a call 401 with a Bearer challenge (the
// seed's "detects the OAuth requirement"). Left out when no server
// connects accounts or may.
func accountsStage(s *Router) Stage {
	return Stage{
		Name:    "accounts",
		Methods: AllMethods,
		Needed:  hasAccounts,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if s.accounts == nil || !c.Backend.PerUser && !c.Backend.Detect {
					return next(ctx, c)
				}
				if !c.Backend.ConnectsAccounts(s.accounts) {
					raw, err := next(ctx, c)
					if refusal, ok := errors.AsType[*upstream.StatusError](err); !ok || !BearerChallenge(refusal) {
						return raw, err
					}
					s.accounts.Detect(c.Backend.Name)
				}
				if err := s.consentRetried(ctx, c, &c.Upward); err != nil {
					return c.consentRefused(err)
				}
				return s.asUser(ctx, c, next, 0)
			}
		},
	}
}

// hasAccounts reports whether a server of rt connects its callers'
// accounts, or may turn out to.
func hasAccounts(rt *Runtime) bool {
	for _, b := range rt.Backends {
		if b.PerUser || b.Detect {
			return true
		}
	}
	return false
}

// BearerChallenge reports whether refusal is a 401 with a Bearer challenge.
func BearerChallenge(refusal *upstream.StatusError) bool {
	if refusal.Code != http.StatusUnauthorized {
		return false
	}
	for _, ch := range refusal.Challenges {
		scheme, _, _ := strings.Cut(strings.TrimSpace(ch), " ")
		if strings.EqualFold(scheme, "bearer") {
			return true
		}
	}
	return false
}

// asUser sends c with its caller's token; asked is how many consents the
// call asked for already.
func (s *Router) asUser(ctx context.Context, c *Call, next CallFunc, asked int) (json.RawMessage, error) {
	user, server := c.Caller.User, c.Backend.Name
	for renewed := 0; ; renewed++ {
		tok, ok, err := s.accounts.Token(ctx, user, server)
		if err != nil {
			return c.consentRefused(err)
		}
		if !ok {
			return s.consent(ctx, c, nil, nil, asked, func(ctx context.Context) (json.RawMessage, error) {
				return s.asUser(ctx, c, next, asked+1)
			})
		}
		c.withToken(tok)
		raw, err := next(ctx, c)
		refusal, refused := errors.AsType[*upstream.StatusError](err)
		if !refused || (refusal.Code != http.StatusUnauthorized && refusal.Code != http.StatusForbidden) {
			if err == nil {
				rediscoverRefused(c.Backend)
			}
			return raw, err
		}
		r, err := s.accounts.Rejected(ctx, user, server, tok, refusal)
		switch {
		case err != nil:
			return c.consentRefused(err)
		case r.Again && renewed == 0:
			continue
		}
		return s.consent(ctx, c, refusal, r.StepUp, asked, func(ctx context.Context) (json.RawMessage, error) {
			return s.asUser(ctx, c, next, asked+1)
		})
	}
}

// rediscoverRefused asks b's upstream for a discovery round when its last
// one was refused for want of a token: a call just went through with a
// user's, so the server's tools can be listed now (rather than at the
// backoff's next round).
func rediscoverRefused(b *Backend) {
	if b.Up == nil {
		return
	}
	if se, ok := errors.AsType[*upstream.StatusError](b.Up.Err()); ok && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden) {
		b.Up.Rediscover()
	}
}

// withToken sets c's upstream Authorization to tok, and keys its upstream
// session by its caller (never by the token: a refresh keeps the session).
func (c *Call) withToken(tok secret.Value) {
	c.upHeader = WithBearer(c.upHeader, tok)
	c.Key.Cred = fingerprint("account:"+c.Caller.User, nil)
}

// WithBearer returns a copy of h (nil: none) with its Authorization set
// to tok as a Bearer token.
func WithBearer(h http.Header, tok secret.Value) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+tok.Reveal())
	return h
}

// consent asks c's caller to connect their account on c.Backend (refused
// and stepUp: why) and, once they did, runs then.
func (s *Router) consent(ctx context.Context, c *Call, refused *upstream.StatusError, stepUp []string, asked int, then func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if asked >= maxConsents {
		return c.consentRefused(fmt.Errorf("MCP server %q still refuses the connected account after %d authorizations", c.Backend.Name, asked))
	}
	cons, err := s.accounts.Start(ctx, c.Caller.User, c.Backend.Name, refused, stepUp)
	if err != nil {
		return c.consentRefused(err)
	}
	ask := consentParams(c.Backend.Name, cons)
	if !c.Session.SupportsURLElicitation() {
		return nil, refusal{urlRequired(c.Backend.Name, ask)}
	}
	ir := consentInputRequired(ask, cons.ID)
	return c.Era.Fulfil(ctx, c.Sink, c.Upward, ir, func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
		// A 2025-11-25 client answered live: wait for the callback, no
		// longer than the consent lives (whatever the store does).
		wctx, cancel := context.WithDeadline(ctx, cons.Expires.Add(consentGrace))
		err := s.consentRetried(wctx, c, &params)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("connecting your account on MCP server %q: the link expired before the authorization came back; call again for a new one", c.Backend.Name)
		}
		if err != nil {
			return c.consentRefused(err)
		}
		c.Sink.Notify("notifications/elicitation/complete", completeParams(cons.ID))
		return then(ctx)
	})
}

// consentRetried, when params answer a consent (its requestState is
// mcp-mux's), takes the answer out of them and waits until the consent
// completed: an error when the caller declined it or it failed.
func (s *Router) consentRetried(ctx context.Context, c *Call, params *json.RawMessage) error {
	id, action, ok := consentAnswer(*params)
	if !ok {
		return nil
	}
	*params = RetryParams(*params, nil, "")
	if action != "accept" {
		return errDeclined{c.Backend.Name}
	}
	if _, legacy := c.Era.(LegacyEra); legacy {
		return s.accounts.Wait(ctx, c.Caller.User, id)
	}
	wctx, cancel := context.WithTimeout(ctx, retryWait)
	defer cancel()
	err := s.accounts.Wait(wctx, c.Caller.User, id)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil // not yet: the token lookup asks again
	}
	return err
}

// errDeclined is a consent the caller declined or cancelled.
type errDeclined struct{ server string }

func (e errDeclined) Error() string {
	return fmt.Sprintf("connecting your account on MCP server %q was declined; nothing was sent to it", e.server)
}

// consentAnswer returns the consent id a retry's requestState names and
// the action of the caller's answer to it.
func consentAnswer(params json.RawMessage) (id, action string, ok bool) {
	if !strings.Contains(string(params), consentPrefix) {
		return "", "", false
	}
	var p struct {
		State     string `json:"requestState"`
		Responses map[string]struct {
			Action string `json:"action"`
		} `json:"inputResponses"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", "", false
	}
	id, ok = strings.CutPrefix(p.State, consentPrefix)
	if !ok || id == "" {
		return "", "", false
	}
	return id, p.Responses[consentInput].Action, true
}

// consentParams are the URL-mode elicitation/create params of cons.
func consentParams(server string, cons *Consent) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "url", ElicitationID: cons.ID, URL: cons.URL,
		Message: fmt.Sprintf("MCP server %q needs you to connect your account: open the link, sign in there and approve mcp-mux. Only open it if you started this request yourself: whoever approves it links their account to yours.", server)}
}

// consentInputRequired is the input_required result asking for ask, its
// requestState naming consent id.
func consentInputRequired(ask *mcp.ElicitParams, id string) json.RawMessage {
	params, _ := json.Marshal(ask)
	b, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{consentInput: map[string]any{"method": "elicitation/create", "params": json.RawMessage(params)}},
		"requestState":  consentPrefix + id,
	})
	return b
}

// completeParams are the params of notifications/elicitation/complete.
func completeParams(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"elicitationId": id})
	return b
}

// urlRequired is the JSON-RPC error -32042 (URLElicitationRequired) for a
// client that can show no URL: the URL is in its data, the message says
// what to do.
func urlRequired(server string, ask *mcp.ElicitParams) *jsonrpc.Error {
	e, _ := errors.AsType[*jsonrpc.Error](mcp.URLElicitationRequiredError([]*mcp.ElicitParams{ask}))
	e.Message = fmt.Sprintf("MCP server %q needs you to connect your account: open the URL in this error's data (elicitations[0].url), approve, then send the request again", server)
	return e
}

// consentRefused is the caller's answer when connecting failed with err:
// a tool error for a tools/call (the model reads why), an invalid-params
// error for any other request.
func (c *Call) consentRefused(err error) (json.RawMessage, error) {
	if errors.Is(err, context.Canceled) {
		return nil, err
	}
	c.Record.Deny("accounts")
	if c.Method == "tools/call" {
		return wire.ToolError(err.Error()), nil
	}
	return nil, refusal{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}}
}

// connectAccount answers the built-in connect_account tool
// ({"server", "disconnect"?}): it connects the caller's account on a
// server, asking for consent as a call that needs it does, or forgets it.
func (s *Router) connectAccount(ctx context.Context, c *Call) (json.RawMessage, error) {
	var a struct {
		Server     string `json:"server"`
		Disconnect bool   `json:"disconnect"`
	}
	if json.Unmarshal(c.Args, &a) != nil || a.Server == "" {
		return wire.ToolError(`connect_account needs {"server": "<name>"}; servers with connected accounts: ` + s.accountServers(c.Runtime)), nil
	}
	b := c.Runtime.ByName[a.Server]
	if b == nil || s.accounts == nil || !b.ConnectsAccounts(s.accounts) {
		return wire.ToolError(fmt.Sprintf("no MCP server %s connects accounts; these do: %s", quoteBounded(a.Server), s.accountServers(c.Runtime))), nil
	}
	c.Backend = b
	if a.Disconnect {
		had, err := s.accounts.Disconnect(ctx, c.Caller.User, b.Name)
		if err != nil {
			return c.consentRefused(err)
		}
		if !had {
			return toolText(fmt.Sprintf("Your account on MCP server %q was not connected.", b.Name)), nil
		}
		return toolText(fmt.Sprintf("Your account on MCP server %q is disconnected: mcp-mux forgot its tokens.", b.Name)), nil
	}
	c.Upward = c.Era.Retry(json.RawMessage(`{}`)) // a 2026-07-28 retry's answer
	if err := s.consentRetried(ctx, c, &c.Upward); err != nil {
		return c.consentRefused(err)
	}
	connected := func(context.Context) (json.RawMessage, error) {
		rediscoverRefused(b)
		return toolText(fmt.Sprintf("Your account on MCP server %q is connected.", b.Name)), nil
	}
	if _, ok, err := s.accounts.Token(ctx, c.Caller.User, b.Name); err != nil || ok {
		if err != nil {
			return c.consentRefused(err)
		}
		return connected(ctx)
	}
	return s.consent(ctx, c, nil, nil, 0, connected)
}

// accountServers lists rt's connected-account servers for a message.
func (s *Router) accountServers(rt *Runtime) string {
	var names []string
	for _, b := range rt.Backends {
		if b.ConnectsAccounts(s.accounts) {
			names = append(names, fmt.Sprintf("%q", b.Name))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// quoteBounded quotes a caller's value for a message, or names it when it
// is too long to repeat.
func quoteBounded(v string) string {
	if len(v) > 128 {
		return fmt.Sprintf("(a %d-byte name)", len(v))
	}
	return fmt.Sprintf("%q", v)
}

// toolText is a CallToolResult of one text block.
func toolText(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}})
	return b
}
