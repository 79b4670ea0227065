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
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/upstream/paramheader"
)

func (u *Upstream) requestRefresh() {
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// run keeps a control session, rediscovering tools whenever it comes up or
// the server announces a change, and retries with capped backoff.
func (u *Upstream) run() {
	bo := backoff{min: u.opts.RetryMin, max: u.opts.RetryMax, jitter: rand.Int64N}
	failures := 0
	for {
		began := time.Now()
		c, err := u.discover()
		if u.opts.OnDiscovery != nil {
			u.opts.OnDiscovery(time.Since(began), err == nil)
		}
		if err != nil {
			if lines := u.stderr.Tail(); len(lines) > 0 {
				err = &stderrError{err: err, lines: lines}
			}
			// Both before Discovered closes: whoever waits on it sees the
			// reason, in Err and in the log.
			u.catalog.setErr(err)
			if failures == 0 {
				u.log.Warn("skipping upstream server", "reason", err)
			} else {
				u.log.Debug("upstream still unavailable", "reason", err, "attempt", failures+1)
			}
		}
		if err == nil {
			u.control.Store(c) // before Discovered: who waits on it may subscribe at once
		}
		u.firstOnce.Do(func() { close(u.discovered) })
		if err != nil {
			failures++
			u.retrying.Store(true)
			select {
			case <-u.ctx.Done():
				return
			case <-time.After(bo.next()):
			}
			continue
		}
		if failures > 0 {
			u.log.Info("upstream server is up", "after_attempts", failures+1)
		}
		failures = 0
		bo.reset()
		u.retrying.Store(false)
		u.catalog.setErr(nil)
		if !u.watch(c) {
			return
		}
		u.log.Warn("upstream control session ended; reconnecting")
		u.reconnects.Add(1)
	}
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
func (u *Upstream) discover() (_ *conn, err error) {
	ctx := u.ctx
	if u.opts.InitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.opts.InitTimeout)
		defer cancel()
	}
	start := time.Now()
	var sent http.Header
	defer func() { err = u.scrub(err, sent) }()
	if u.opts.BaseHeaders != nil {
		h, err := u.opts.BaseHeaders(ctx)
		if err != nil {
			u.log.Warn("discovering without credentials", "reason", u.scrub(err, nil))
			h = u.opts.Header
		}
		sent = h
		ctx = withHeaders(ctx, h)
	}
	c, err := u.dial(ctx, Key{}, true)
	if err != nil {
		var se *StatusError
		if u.opts.OnUnauthorized != nil && sent != nil && errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			u.opts.OnUnauthorized(sent)
		}
		return nil, err
	}
	lists, err := u.list(ctx, c)
	if err != nil {
		c.close()
		if ctx.Err() != nil && u.ctx.Err() == nil {
			return nil, fmt.Errorf("tool discovery timed out after %s", u.opts.InitTimeout)
		}
		return nil, err
	}
	u.publish(lists)
	u.log.Info("upstream discovered", "tools", len(lists.Tools), "prompts", len(lists.Prompts),
		"resources", len(lists.Resources), "templates", len(lists.Templates), "duration", time.Since(start).Round(time.Millisecond))
	return c, nil
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
			lists, err := u.list(ctx, c)
			cancel()
			if err != nil {
				u.log.Warn("refreshing lists failed", "err", u.scrub(err, headersFrom(ctx)))
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

// list fetches every list the server's capabilities announce. Only tools
// are required (of a server that announces them): a prompts or resources
// list that fails — method not found, any other error — is empty, with one
// warning until it works again, so a server whose optional lists are broken
// still serves its tools, and one without tools still serves the rest.
func (u *Upstream) list(ctx context.Context, c *conn) (Lists, error) {
	l := Lists{Capabilities: c.cs.InitializeResult().Capabilities}
	caps := l.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	var err error
	if caps.Tools != nil {
		if l.Tools, err = u.listTools(ctx, c); err != nil {
			return l, fmt.Errorf("listing tools: %w", err)
		}
	}
	optional := func(method, field, key string) ([]Item, error) {
		items, err := u.listItems(ctx, c, method, field, key)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", method, err) // the round timed out or is closing
		}
		if u.catalog.noteOptional(method, err) {
			u.log.Warn("optional list failed; serving it empty", "method", method, "err", err)
		}
		return items, nil
	}
	if caps.Prompts != nil || u.hasPrompts.Load() {
		if l.Prompts, err = optional("prompts/list", "prompts", "name"); err != nil {
			return l, err
		}
	}
	if caps.Resources != nil || u.hasResources.Load() {
		if l.Resources, err = optional("resources/list", "resources", "uri"); err != nil {
			return l, err
		}
		if l.Templates, err = optional("resources/templates/list", "resourceTemplates", "uriTemplate"); err != nil {
			return l, err
		}
	}
	return l, nil
}

// listItems pages through a list method, keying each item by keyField.
func (u *Upstream) listItems(ctx context.Context, c *conn, method, field, keyField string) ([]Item, error) {
	var items []Item
	var cursor string
	budget := listBudget{method: method}
	for range maxListPages {
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := c.request(ctx, u, method, params, nil)
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding %s result: %w", method, err)
		}
		var list []json.RawMessage
		if err := json.Unmarshal(page[field], &list); err != nil && page[field] != nil {
			return nil, fmt.Errorf("decoding %s result: %w", method, err)
		}
		if err := budget.spend(len(raw), len(list)); err != nil {
			return nil, err
		}
		for _, it := range list {
			var head map[string]json.RawMessage
			var key string
			if json.Unmarshal(it, &head) != nil || json.Unmarshal(head[keyField], &key) != nil || key == "" {
				u.log.Warn("ignoring a listed item without a "+keyField, "method", method)
				continue
			}
			items = append(items, Item{Key: key, Raw: it})
		}
		cursor = ""
		_ = json.Unmarshal(page["nextCursor"], &cursor)
		if cursor == "" {
			return items, nil
		}
	}
	return nil, fmt.Errorf("%s did not end after %d pages", method, maxListPages)
}

const maxListPages = 1000

func (u *Upstream) listTools(ctx context.Context, c *conn) ([]Tool, error) {
	var tools []Tool
	var cursor string
	budget := listBudget{method: "tools/list"}
	for range maxListPages {
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := c.request(ctx, u, "tools/list", params, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding tools/list result: %w", err)
		}
		if err := budget.spend(len(raw), len(page.Tools)); err != nil {
			return nil, err
		}
		for _, t := range page.Tools {
			var head struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(t, &head); err != nil || head.Name == "" {
				u.log.Warn("ignoring a tool without a name")
				continue
			}
			tools = append(tools, Tool{Name: head.Name, Raw: t})
		}
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("tools/list did not end after %d pages", maxListPages)
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
