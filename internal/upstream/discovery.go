// Discovery: the control session, kept up by run with capped backoff, and
// the listing of tools, prompts and resources on it.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream/paramheader"
)

// Rediscover asks for a discovery round now: after a failed one, the
// backoff is cut short (credentials it lacked may have arrived: a user
// connected an account); while up, the lists are refreshed (a server's
// list_changed asks the same).
func (u *Upstream) Rediscover() {
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// run keeps a control session, rediscovering tools whenever it comes up or
// the server announces a change, and retries with capped backoff.
func (u *Upstream) run() {
	r := rediscovery{u: u, bo: backoff{min: u.opts.RetryMin, max: u.opts.RetryMax, jitter: rand.Int64N}}
	for {
		c, err := r.round()
		if err != nil {
			if !r.wait() {
				return
			}
			continue
		}
		r.recovered()
		if !u.watch(c) {
			return
		}
		u.log.Warn("upstream control session ended; reconnecting")
		u.reconnects.Add(1)
	}
}

// rediscovery is the state of run: the backoff schedule and how many
// rounds in a row failed.
type rediscovery struct {
	u        *Upstream
	bo       backoff
	failures int
}

// round runs one discovery round and publishes how it went: a failure in
// Err and the log, a control session in u.control. The first round's end
// closes Discovered.
func (r *rediscovery) round() (*conn, error) {
	u := r.u
	began := time.Now()
	c, err := r.discover()
	if u.opts.OnDiscovery != nil {
		u.opts.OnDiscovery(time.Since(began), err == nil)
	}
	// Both before Discovered closes: whoever waits on it sees the reason,
	// in Err and in the log, or may subscribe on the session at once.
	if err != nil {
		r.report(err)
	} else {
		u.control.Store(c)
	}
	u.firstOnce.Do(func() { close(u.discovered) })
	return c, err
}

// report records the failure of a round, with the server's last stderr
// lines, in Err and the log: a warning the first time, debug while the
// server stays unavailable.
func (r *rediscovery) report(err error) {
	u := r.u
	if lines := u.stderr.Tail(); len(lines) > 0 {
		err = &StderrError{Err: err, Lines: lines, Last: u.stderr.Last()}
	}
	u.catalog.setErr(err)
	if r.failures == 0 {
		u.log.Warn("skipping upstream server", "reason", err)
	} else {
		u.log.Debug("upstream still unavailable", "reason", err, "attempt", r.failures+1)
	}
}

// wait counts a failed round and waits out the backoff, or until
// Rediscover (stderr is not logged meanwhile); false when the Upstream is
// closing.
func (r *rediscovery) wait() bool {
	r.failures++
	r.u.retrying.Store(true)
	t := time.NewTimer(r.bo.next())
	defer t.Stop()
	select {
	case <-r.u.ctx.Done():
		return false
	case <-t.C:
	case <-r.u.refresh: // Rediscover
	}
	return true
}

// recovered resets the schedule after a round that worked.
func (r *rediscovery) recovered() {
	u := r.u
	if r.failures > 0 {
		u.log.Info("upstream server is up", "after_attempts", r.failures+1)
	}
	r.failures = 0
	r.bo.reset()
	u.retrying.Store(false)
	u.catalog.setErr(nil)
}

// backoff is the rediscovery schedule: the n-th wait after a failure is
// drawn from [d/2, d] with d = min·2ⁿ⁻¹ capped at max (jittered so that
// many muxes restarted together do not retry in step).
type backoff struct {
	min, max time.Duration
	jitter   func(n int64) int64 // uniform in [0, n)
	d        time.Duration
}

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = b.min
	}
	wait := b.d/2 + time.Duration(b.jitter(int64(b.d)/2+1))
	b.d = min(b.d*2, b.max)
	return wait
}

func (b *backoff) reset() { b.d = 0 }

// discover dials a control session and lists its tools, all within InitTimeout.
func (r *rediscovery) discover() (_ *conn, err error) {
	u := r.u
	ctx := u.ctx
	if u.opts.InitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.InitTimeout)
		defer cancel()
	}
	start := time.Now()
	ctx, span := u.opts.Telemetry.Internal(ctx, "discover "+u.opts.Name, nil, telemetry.ServerAttr.String(u.opts.Name))
	defer func() { span.End(err, false) }() // err unscrubbed: End records its class only
	ctx, sent := r.withBaseHeaders(ctx)
	defer func() { err = u.scrubs.Error(err, sent) }()
	c, err := u.dial(ctx, Key{}, true)
	if err != nil {
		r.unauthorized(err, sent)
		return nil, err
	}
	lists, err := (&lister{u: u, ctx: ctx, c: c}).lists()
	if err != nil {
		c.close()
		if ctx.Err() != nil && u.ctx.Err() == nil {
			return nil, fmt.Errorf("tool discovery timed out after %s", u.opts.InitTimeout)
		}
		return nil, err
	}
	u.publish(lists)
	u.log.Info("upstream discovered", "protocol", lists.Protocol, "eras", strings.Join(lists.Eras, ","), "tools", len(lists.Tools), "prompts", len(lists.Prompts),
		"resources", len(lists.Resources), "templates", len(lists.Templates), "duration", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// withBaseHeaders puts the headers of requests without a caller
// (Options.BaseHeaders) on ctx and returns them too; none without
// BaseHeaders. When they fail, discovery goes on with the static ones.
func (r *rediscovery) withBaseHeaders(ctx context.Context) (context.Context, http.Header) {
	u := r.u
	if u.opts.BaseHeaders == nil {
		return ctx, nil
	}
	h, err := u.opts.BaseHeaders(ctx)
	if err != nil {
		u.log.Warn("discovering without credentials", "reason", u.scrubs.Error(err, nil))
		h = u.opts.Header
	}
	return withHeaders(ctx, h), h
}

// unauthorized tells OnRefused about a dial refused with 401 or 403, and
// OnUnauthorized about one refused with 401 while carrying sent, so that
// a token is refreshed before the next round.
func (r *rediscovery) unauthorized(err error, sent http.Header) {
	se, refused := errors.AsType[*StatusError](err)
	if !refused {
		return
	}
	if r.u.opts.OnRefused != nil {
		r.u.opts.OnRefused(se)
	}
	if r.u.opts.OnUnauthorized != nil && sent != nil && se.Code == http.StatusUnauthorized {
		r.u.opts.OnUnauthorized(sent)
	}
}

// watch holds the control session until it ends (false: the upstream is closing).
func (u *Upstream) watch(c *conn) bool {
	defer c.close()
	u.control.Store(c)
	defer u.control.CompareAndSwap(c, nil)
	u.resubscribe(c)
	for {
		select {
		case <-u.ctx.Done():
			return false
		case <-c.done:
			return true
		case <-u.refresh:
			ctx, cancel := context.WithTimeout(u.ctx, max(u.opts.InitTimeout, 5*time.Second))
			lists, err := (&lister{u: u, ctx: ctx, c: c}).lists()
			cancel()
			if err != nil {
				u.log.Warn("refreshing lists failed", "err", u.scrubs.Error(err, headersFrom(ctx)))
				continue
			}
			u.publish(lists)
		}
	}
}

func (u *Upstream) publish(l Lists) {
	if u.opts.Transport == HTTP {
		var ix paramheader.Index
		for _, t := range l.Tools {
			if !ix.Add(t.Name, t.Raw) {
				u.log.Warn("ignoring the invalid x-mcp-header annotations of a tool (calls get no Mcp-Param headers)", "tool", t.Name)
			}
		}
		u.annotations.Store(&ix)
	}
	u.catalog.set(l) // healthy before OnChange looks
	if u.opts.OnChange != nil {
		u.opts.OnChange()
	}
}

// lister fetches the lists of one discovery round on the control
// session c.
type lister struct {
	u     *Upstream
	ctx   context.Context
	c     *conn
	hints map[string]CacheHint // by list method, over its pages
}

// hint notes a page's caching hint for method.
func (l *lister) hint(method string, ttlMs, scope json.RawMessage) {
	h := HintOf(ttlMs, scope)
	if !h.Set {
		return
	}
	if l.hints == nil {
		l.hints = make(map[string]CacheHint, 4)
	}
	l.hints[method] = l.hints[method].Narrow(h)
}

// lists fetches every list the server's capabilities announce. Only tools
// are required (of a server that announces them): a prompts or resources
// list that fails — method not found, any other error — is empty, with one
// warning until it works again, so a server whose optional lists are broken
// still serves its tools, and one without tools still serves the rest.
func (l *lister) lists() (Lists, error) {
	ir := l.c.cs.InitializeResult()
	out := Lists{Capabilities: ir.Capabilities, At: time.Now(), Protocol: ir.ProtocolVersion, Eras: l.u.eras.spoken(l.u.opts.pinnedEra())}
	caps := out.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	if caps.Tools != nil {
		tools, err := l.tools()
		if err != nil {
			return out, fmt.Errorf("listing tools: %w", err)
		}
		out.Tools = tools
	}
	err := l.optionals(caps, &out)
	out.Hints = l.hints
	return out, err
}

// optionals fetches the prompts and resources lists into out, when caps
// (or a list_changed since) announce them.
func (l *lister) optionals(caps *mcp.ServerCapabilities, out *Lists) error {
	var err error
	if caps.Prompts != nil || l.u.hasPrompts.Load() {
		if out.Prompts, err = l.optional("prompts/list", "prompts", "name"); err != nil {
			return err
		}
	}
	if caps.Resources != nil || l.u.hasResources.Load() {
		if out.Resources, err = l.optional("resources/list", "resources", "uri"); err != nil {
			return err
		}
		if out.Templates, err = l.optional("resources/templates/list", "resourceTemplates", "uriTemplate"); err != nil {
			return err
		}
	}
	return nil
}

// optional fetches an optional list: a failure is an empty list (warned
// about once until it works again), unless the round timed out or is
// closing.
func (l *lister) optional(method, field, key string) ([]Item, error) {
	items, err := l.items(method, field, key)
	if err != nil && l.ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", method, err) // the round timed out or is closing
	}
	if l.u.catalog.noteOptional(method, err) {
		l.u.log.Warn("optional list failed; serving it empty", "method", method, "err", err)
	}
	return items, nil
}

// items pages through a list method, keying each item by keyField.
func (l *lister) items(method, field, keyField string) ([]Item, error) {
	var items []Item
	var cursor string
	budget := listBudget{method: method}
	for range maxListPages {
		raw, err := l.c.request(l.ctx, l.u, method, cursorParams(cursor), nil, nil)
		if err != nil {
			return nil, err
		}
		list, next, err := itemsPage(method, field, raw)
		if err != nil {
			return nil, err
		}
		l.pageHint(method, raw)
		if err := budget.spend(len(raw), len(list)); err != nil {
			return nil, err
		}
		items = l.keyed(items, list, method, keyField)
		if next == "" {
			return items, nil
		}
		cursor = next
	}
	return nil, unendedList(method)
}

// cursorParams are the params of a list request for the page at cursor
// (none for the first).
func cursorParams(cursor string) json.RawMessage {
	if cursor == "" {
		return nil
	}
	params, _ := json.Marshal(map[string]string{"cursor": cursor})
	return params
}

// itemsPage decodes one page of a list method: its items (under field)
// and the next cursor.
func itemsPage(method, field string, raw json.RawMessage) (list []json.RawMessage, next string, _ error) {
	var page map[string]json.RawMessage
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, "", fmt.Errorf("decoding %s result: %w", method, err)
	}
	if err := json.Unmarshal(page[field], &list); err != nil && page[field] != nil {
		return nil, "", fmt.Errorf("decoding %s result: %w", method, err)
	}
	_ = json.Unmarshal(page["nextCursor"], &next)
	return list, next, nil
}

// pageHint notes the caching hint of a list page.
func (l *lister) pageHint(method string, raw json.RawMessage) {
	var page struct {
		TTL   json.RawMessage `json:"ttlMs"`
		Scope json.RawMessage `json:"cacheScope"`
	}
	if json.Unmarshal(raw, &page) == nil {
		l.hint(method, page.TTL, page.Scope)
	}
}

// keyed appends the items of list to items, keyed by keyField; an item
// without one is left out with a warning.
func (l *lister) keyed(items []Item, list []json.RawMessage, method, keyField string) []Item {
	for _, it := range list {
		var head map[string]json.RawMessage
		var key string
		if json.Unmarshal(it, &head) != nil || json.Unmarshal(head[keyField], &key) != nil || key == "" {
			l.u.log.Warn("ignoring a listed item without a "+keyField, "method", method)
			continue
		}
		items = append(items, Item{Key: key, Raw: it})
	}
	return items
}

// tools pages through tools/list.
func (l *lister) tools() ([]Tool, error) {
	var tools []Tool
	var cursor string
	budget := listBudget{method: "tools/list"}
	for range maxListPages {
		raw, err := l.c.request(l.ctx, l.u, "tools/list", cursorParams(cursor), nil, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
			TTL        json.RawMessage   `json:"ttlMs"`
			Scope      json.RawMessage   `json:"cacheScope"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding tools/list result: %w", err)
		}
		l.hint("tools/list", page.TTL, page.Scope)
		if err := budget.spend(len(raw), len(page.Tools)); err != nil {
			return nil, err
		}
		tools = l.named(tools, page.Tools)
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
	return nil, unendedList("tools/list")
}

// named appends the tools of a page to tools; a tool without a name is
// left out with a warning.
func (l *lister) named(tools []Tool, page []json.RawMessage) []Tool {
	for _, t := range page {
		var head struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(t, &head); err != nil || head.Name == "" {
			l.u.log.Warn("ignoring a tool without a name")
			continue
		}
		tools = append(tools, Tool{Name: head.Name, Raw: t})
	}
	return tools
}

// catalog is what discovery last found and how its last round went.
type catalog struct {
	mu        sync.Mutex
	lists     Lists
	err       error           // last discovery error, nil when healthy
	optFailed map[string]bool // optional lists whose last listing failed
}

func (k *catalog) current() Lists {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lists
}

func (k *catalog) lastErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

func (k *catalog) setErr(err error) {
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

// set publishes l and clears the error.
func (k *catalog) set(l Lists) {
	k.mu.Lock()
	k.lists = l
	k.err = nil
	k.mu.Unlock()
}

// noteOptional records how an optional list went and reports whether to
// warn: once when it fails, and again only after it worked in between.
func (k *catalog) noteOptional(method string, err error) (warn bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.optFailed == nil {
		k.optFailed = make(map[string]bool)
	}
	warn = err != nil && !k.optFailed[method]
	k.optFailed[method] = err != nil
	return warn
}
