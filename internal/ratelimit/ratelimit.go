// Package ratelimit enforces the "limits" block: calls per interval and
// calls in flight, per tool, per server, per caller and per (caller,
// tool), checked on the call path before anything is forwarded.
//
// Without a Store every budget lives in this process: rates in
// golang.org/x/time/rate token buckets, calls in flight in counters. With
// a Store (store.redis_url) every replica on that Redis shares them:
// rates through github.com/go-redis/redis_rate (GCRA, one round trip per
// check), calls in flight as leases in a sorted set per budget (lease.go).
// While the store is unreachable a Limiter fails open or closed as the
// config says, and Health reports it.
//
// A Limiter lives as long as the server; SetRules swaps in the rules of a
// reloaded config, keeping the counts of calls in flight (by rule name and
// subject) and the rate state of rules whose rate did not change.
//
// A call that waits on its client — a 2026-07-28 call parked for the
// client's input — gives its calls-in-flight slots back while it waits
// (Decision.Pause) and takes them again when the client resumes it
// (Decision.Resume), so a client that walks away holds none.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// Kinds of refusal, as the rejections metric labels them.
const (
	KindRate     = "rate"
	KindInFlight = "in_flight"
	KindStore    = "store_unreachable" // failing closed while the store is down
)

// Store is the Redis the budgets are shared through.
type Store struct {
	// Client must end a round trip at its context's deadline
	// (ContextTimeoutEnabled, as Dial sets): without it go-redis bounds a
	// round trip by the client's read timeout, not by Timeout, and New
	// refuses it.
	Client redis.UniversalClient
	// KeyPrefix is store.key_prefix; the keys are <prefix>limit:… (rates,
	// under redis_rate's own "rate:" prefix) and <prefix>limit-inflight:….
	KeyPrefix string
	// Timeout bounds one round trip; default 1s. One that takes longer
	// counts as the store being unreachable (on_store_error decides).
	Timeout time.Duration
}

// Options configure a Limiter.
type Options struct {
	// Store shares the budgets with other replicas; nil keeps them here.
	// The Limiter closes its client on Close.
	Store *Store
	// Registerer gets mcp_mux_limit_rejections_total (nil: not registered).
	Registerer prometheus.Registerer
	Log        hclog.Logger
	// LeaseTTL is how long a shared call-in-flight slot outlives a replica
	// that stopped renewing it (killed); default 2m, renewed every third.
	LeaseTTL time.Duration
}

// Call is what a rule matches: who calls which server's tool. Tool is
// empty for a request that names no tool (prompts/get, resources/read,
// completion/complete, a resource subscription, the tasks extension's
// requests): only rules without a tool glob match it, and its Method
// stands in for the tool in the budgets of the tool and caller_tool
// scopes.
type Call struct {
	Caller, Server, Tool string
	Method               string // the request's method when Tool is empty
}

// Rule is one compiled limits rule.
type Rule struct {
	config.LimitRule
}

// matches reports whether r applies to c.
func (r *Rule) matches(c Call) bool {
	if r.Server != "" && r.Server != c.Server {
		return false
	}
	if r.Tool == "" {
		return true
	}
	if c.Tool == "" {
		return false
	}
	ok, _ := path.Match(r.Tool, c.Tool)
	return ok
}

// subject is the budget of r that c counts against.
func (r *Rule) subject(c Call) string {
	tool := c.Tool
	if tool == "" {
		tool = c.Method // a tool name has no "/": no method budget is a tool's
	}
	switch r.Scope {
	case config.LimitScopeTool:
		return tool
	case config.LimitScopeServer:
		return c.Server
	case config.LimitScopeCaller:
		return c.Caller
	}
	return strconv.Itoa(len(c.Caller)) + ":" + c.Caller + ":" + tool
}

// scopeText is how a refusal names r's scope.
func (r *Rule) scopeText() string {
	switch r.Scope {
	case config.LimitScopeTool:
		return "tool"
	case config.LimitScopeServer:
		return "server"
	case config.LimitScopeCaller:
		return "caller"
	}
	return "(caller, tool)"
}

// ruleSet is the rules of one config.
type ruleSet struct {
	rules      []Rule
	failClosed bool
}

// Limiter checks calls against the rules of the current config.
type Limiter struct {
	opts    Options
	log     hclog.Logger
	rules   atomic.Pointer[ruleSet]
	rdb     redis.UniversalClient // nil: in process
	rate    *redis_rate.Limiter
	prefix  string
	timeout time.Duration // one store round trip
	refused *prometheus.CounterVec
	leases  leaseTable
	down    atomic.Bool // the last store round trip failed

	mu        sync.Mutex
	buckets   map[string]*bucket          // in-process rates
	inflight  map[string]int              // in-process calls in flight
	refusals  map[string]map[string]int64 // by rule and kind (usage.go)
	lastSweep time.Time

	stop chan struct{}
	done chan struct{}
}

// New returns a Limiter with no rules; Close stops it.
func New(opts Options) (*Limiter, error) {
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 2 * time.Minute
	}
	l := &Limiter{opts: opts, timeout: time.Second, log: opts.Log, buckets: map[string]*bucket{}, inflight: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{}), lastSweep: time.Now()}
	l.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_mux_limit_rejections_total",
		Help: "Calls refused by a limits rule, by rule and kind (rate, in_flight, store_unreachable)."}, []string{"limit", "kind"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(l.refused); err != nil {
			return nil, fmt.Errorf("ratelimit: registering the rejections counter: %w", err)
		}
	}
	l.rules.Store(&ruleSet{})
	if opts.Store != nil && opts.Store.Client != nil {
		if err := honoursDeadlines(opts.Store.Client); err != nil {
			return nil, err
		}
		l.rdb, l.prefix = opts.Store.Client, opts.Store.KeyPrefix
		if opts.Store.Timeout > 0 {
			l.timeout = opts.Store.Timeout
		}
		l.rate = redis_rate.NewLimiter(l.rdb)
		l.leases.init()
		go l.renew()
	} else {
		close(l.done)
	}
	return l, nil
}

// honoursDeadlines checks that c ends a round trip at its context's
// deadline, so that Store.Timeout bounds it.
func honoursDeadlines(c redis.UniversalClient) error {
	var ok bool
	switch c := c.(type) {
	case *storeclient.Client:
		return honoursDeadlines(c.UniversalClient)
	case *redis.Client:
		ok = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		ok = c.Options().ContextTimeoutEnabled
	default:
		return fmt.Errorf("ratelimit: the store's client is a %T; want a *redis.Client or *redis.ClusterClient", c)
	}
	if !ok {
		return errors.New("ratelimit: the store's client does not end a round trip at its context's deadline " +
			"(redis.Options.ContextTimeoutEnabled is off), so the store timeout would not bound it; build it with storeclient.Open")
	}
	return nil
}

// Close stops renewing leases and closes the store's client.
func (l *Limiter) Close() error {
	if l == nil || l.rdb == nil {
		return nil
	}
	close(l.stop)
	<-l.done
	if _, shared := l.rdb.(*storeclient.Client); shared {
		return nil // its opener closes it
	}
	if err := l.rdb.Close(); err != nil {
		return fmt.Errorf("ratelimit: closing the store client: %w", err)
	}
	return nil
}

// SetRules replaces the rules with lim's (a reload). Counts of calls in
// flight are kept by rule name and subject, so a call admitted under the
// old rules still counts against a rule of the same name.
func (l *Limiter) SetRules(lim config.Limits) {
	if l == nil {
		return
	}
	rs := &ruleSet{failClosed: lim.FailClosed, rules: make([]Rule, len(lim.Rules))}
	for i, r := range lim.Rules {
		rs.rules[i] = Rule{LimitRule: r}
	}
	l.rules.Store(rs)
}

// Active reports whether any rule is configured.
func (l *Limiter) Active() bool { return l != nil && len(l.rules.Load().rules) > 0 }

// Decision is the outcome of Admit: admitted (call Release when the call
// has finished) or refused by one rule.
type Decision struct {
	Allowed bool
	// Rule, Kind and RetryAfter describe a refusal.
	Rule       string
	Kind       string
	RetryAfter time.Duration
	// Message is a refusal's text for the caller: the rule, its limit and
	// when to retry.
	Message string

	h *holding // the calls-in-flight slots of an admitted call; nil: none
}

// holding is what an admitted call holds of the calls-in-flight caps,
// shared by the copies of its Decision.
type holding struct {
	l *Limiter
	c Call

	mu     sync.Mutex
	slots  []slot
	paused bool // its slots are given back while the call waits (Pause)
	done   bool // released: nothing is taken again
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up (at least 1).
func (d *Decision) RetryAfterSeconds() int {
	return max(int(math.Ceil(d.RetryAfter.Seconds())), 1)
}

// Holds reports whether an admitted call took calls-in-flight slots
// (Release, Pause and Resume do nothing otherwise).
func (d *Decision) Holds() bool { return d.h != nil }

// Release returns the calls-in-flight slots an admitted call holds; the
// call has finished, and a later Resume takes nothing.
func (d *Decision) Release() {
	h := d.h
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	h.giveBack()
}

// Pause returns the calls-in-flight slots of an admitted call that waits
// for its client (a parked call), until Resume.
func (d *Decision) Pause() {
	h := d.h
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.giveBack()
		h.paused = true
	}
}

// Resume takes the slots of a paused call again, under the rules of now,
// before it goes on; rates are not charged again (it is the same call).
// Refused, it holds nothing and stays paused, and the refusal is returned
// (counted as Admit's are); a call that is not paused, or has finished,
// is admitted as it is.
func (d *Decision) Resume(ctx context.Context) Decision {
	h := d.h
	if h == nil {
		return Decision{Allowed: true}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || !h.paused {
		return Decision{Allowed: true}
	}
	if ref, ok := h.l.acquireAll(ctx, h.l.rules.Load(), h.c, h); !ok {
		return ref
	}
	h.paused = false
	return Decision{Allowed: true}
}

// giveBack returns h's slots; h.mu is held (or h is Admit's, not shared
// yet).
func (h *holding) giveBack() {
	for _, s := range h.slots {
		h.l.release(s)
	}
	h.slots = h.slots[:0]
}

// Admit checks c against every rule that matches it: first the calls in
// flight (taking a slot of each), then the rates (taking a call from
// each). A refusal releases what was taken; a rate checked before the one
// that refused keeps the call counted. With no rule matching, Admit
// allocates nothing.
func (l *Limiter) Admit(ctx context.Context, c Call) Decision {
	if l == nil {
		return Decision{Allowed: true}
	}
	rs := l.rules.Load()
	d := Decision{Allowed: true}
	for i := range rs.rules {
		if r := &rs.rules[i]; r.InFlight > 0 && r.matches(c) {
			d.h = &holding{l: l, c: c}
			if ref, ok := l.acquireAll(ctx, rs, c, d.h); !ok {
				return ref
			}
			break
		}
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		if r.Calls == 0 || !r.matches(c) {
			continue
		}
		if ref, ok := l.allow(ctx, rs, r, r.subject(c)); !ok {
			d.Release()
			return ref
		}
	}
	return d
}

// acquireAll takes into h a calls-in-flight slot of every rule of rs that
// matches c; refused by one, it returns what it took and the refusal.
func (l *Limiter) acquireAll(ctx context.Context, rs *ruleSet, c Call, h *holding) (Decision, bool) {
	for i := range rs.rules {
		r := &rs.rules[i]
		if r.InFlight == 0 || !r.matches(c) {
			continue
		}
		s, ref, ok := l.acquire(ctx, rs, r, r.subject(c))
		if !ok {
			h.giveBack()
			return ref, false
		}
		if s.key != "" {
			h.slots = append(h.slots, s)
		}
	}
	return Decision{}, true
}

// acquire takes a calls-in-flight slot of r's budget for subject; a slot
// without a key is none taken (the store is down, failing open).
func (l *Limiter) acquire(ctx context.Context, rs *ruleSet, r *Rule, subject string) (slot, Decision, bool) {
	key := r.Name + ":" + subject
	if l.rdb == nil {
		l.mu.Lock()
		n := l.inflight[key]
		if n >= r.InFlight {
			l.mu.Unlock()
			return slot{}, l.refuse(r, KindInFlight, time.Second), false
		}
		l.inflight[key] = n + 1
		l.mu.Unlock()
		return slot{key: key}, Decision{}, true
	}
	s, ok, err := l.acquireShared(ctx, l.prefix+"limit-inflight:"+key, r.InFlight)
	if err != nil {
		ref, ok := l.storeFailed(rs, r, err)
		return slot{}, ref, ok
	}
	if !ok {
		return slot{}, l.refuse(r, KindInFlight, time.Second), false
	}
	return s, Decision{}, true
}

// allow takes one call from r's rate budget for subject.
func (l *Limiter) allow(ctx context.Context, rs *ruleSet, r *Rule, subject string) (Decision, bool) {
	key := r.Name + ":" + subject
	if l.rdb == nil {
		if ok, retry := l.allowLocal(key, r); !ok {
			return l.refuse(r, KindRate, retry), false
		}
		return Decision{}, true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	res, err := l.rate.Allow(ctx, l.prefix+"limit:"+key, redis_rate.Limit{Rate: r.Calls, Burst: r.Calls, Period: r.Per})
	if err != nil {
		return l.storeFailed(rs, r, fmt.Errorf("rate of %q: %w", r.Name, err))
	}
	l.storeOK()
	if res.Allowed == 0 {
		return l.refuse(r, KindRate, res.RetryAfter), false
	}
	return Decision{}, true
}

// refuse is r's refusal of kind, counted.
func (l *Limiter) refuse(r *Rule, kind string, retry time.Duration) Decision {
	l.refused.WithLabelValues(r.Name, kind).Inc()
	l.noteRefusal(r.Name, kind)
	d := Decision{Rule: r.Name, Kind: kind, RetryAfter: retry}
	switch kind {
	case KindRate:
		d.Message = fmt.Sprintf("rate limit %q exceeded: %d calls per %s for each %s; retry after %ds",
			r.Name, r.Calls, r.Per, r.scopeText(), d.RetryAfterSeconds())
	case KindInFlight:
		d.Message = fmt.Sprintf("concurrency limit %q exceeded: %d calls in flight for each %s; retry after %ds (or when one of them finishes)",
			r.Name, r.InFlight, r.scopeText(), d.RetryAfterSeconds())
	default:
		d.Message = fmt.Sprintf("limit %q cannot be checked: the limit store is unreachable (limits fail closed); retry after %ds",
			r.Name, d.RetryAfterSeconds())
	}
	return d
}

// storeFailed answers a failed store round trip for r: a refusal when
// failing closed, else admitted (ok) without this rule.
func (l *Limiter) storeFailed(rs *ruleSet, r *Rule, err error) (Decision, bool) {
	if !l.down.Swap(true) {
		l.log.Warn("limits: the store is unreachable", "fail_closed", rs.failClosed, "err", err)
	}
	if rs.failClosed {
		return l.refuse(r, KindStore, time.Second), false
	}
	return Decision{}, true
}

// probeEvery is how often a shared limiter pings its store for Health,
// and probeTimeout bounds one ping.
const (
	probeEvery   = time.Second
	probeTimeout = time.Second
)

// probe pings the store once, with rules to check, and notes the outcome.
func (l *Limiter) probe() {
	if !l.Active() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(probeTimeout, l.timeout))
	defer cancel()
	if err := l.rdb.Ping(ctx).Err(); err != nil {
		if !l.down.Swap(true) {
			l.log.Warn("limits: the store is unreachable", "err", err)
		}
		return
	}
	l.storeOK()
}

// storeOK notes a store round trip that worked.
func (l *Limiter) storeOK() {
	if l.down.Swap(false) {
		l.log.Info("limits: the store is reachable again")
	}
}

// Health is the limits' state for /readyz: "" without rules, "ok",
// or "degraded: …" while the store is unreachable. It reads what the
// calls and the background probe (probe) last saw: /readyz never waits on
// the store.
func (l *Limiter) Health() string {
	if !l.Active() {
		return ""
	}
	if l.rdb == nil {
		return "ok (in process)"
	}
	if !l.down.Load() {
		return "ok (shared)"
	}
	if l.rules.Load().failClosed {
		return "degraded: store unreachable, failing closed"
	}
	return "degraded: store unreachable, failing open"
}
