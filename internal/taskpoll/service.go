package taskpoll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is the mcp_tasks block (DeerFlow's McpTasksConfig), startup-only.
type Config struct {
	PollInterval              time.Duration // default 5s
	Lease                     time.Duration // default 120s
	MaxConcurrentPolls        int           // default 8
	MaxPollBackoff            time.Duration // default 300s
	InputRequiredPollInterval time.Duration // default 60s
	DegradedAfterErrors       int           // default 3
	MaxResultBytes            int           // default 65536
	ResultPreviewMaxChars     int           // default 2000
	// Retention is how long a terminal record is kept (the records' TTL,
	// the extension's ttlMs; default 7 days). The per-user cap on active
	// tasks is the store's (MaxActivePerUser in its options).
	Retention time.Duration
}

// DefaultRetention is Config.Retention's default.
const DefaultRetention = 7 * 24 * time.Hour

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollInterval, 5*time.Second)
	def(&c.Lease, 120*time.Second)
	def(&c.MaxPollBackoff, 300*time.Second)
	def(&c.InputRequiredPollInterval, 60*time.Second)
	def(&c.Retention, DefaultRetention)
	if c.MaxConcurrentPolls <= 0 {
		c.MaxConcurrentPolls = 8
	}
	if c.DegradedAfterErrors <= 0 {
		c.DegradedAfterErrors = 3
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = 65536
	}
	if c.ResultPreviewMaxChars <= 0 {
		c.ResultPreviewMaxChars = 2000
	}
}

// Call is one task tool call the poller (or a submit's compensation) makes.
type Call struct {
	Server, User, Thread string
	Tool                 string // raw tool name
	Args                 json.RawMessage
	Task                 *Task // the task called for, read-only (nil: none)
}

// Caller runs a raw tool on a server with server-level credentials only
// (static headers, OAuth) — never a request's secrets — and returns the raw
// CallToolResult. A returned error is transient.
type Caller interface {
	CallTool(ctx context.Context, c Call) (json.RawMessage, error)
}

// Options configure New.
type Options struct {
	Store  Store
	Caller Caller
	Config Config
	// Owner names this replica's leases (default "<hostname>:<random>").
	Owner  string
	Logger hclog.Logger
	// Registerer receives the task metrics (nil: none).
	Registerer prometheus.Registerer
	// Now and Jitter are for tests: the clock, and the ±10 % spread applied
	// to every delay.
	Now    func() time.Time
	Jitter func(time.Duration) time.Duration
}

// Service is the durable task runtime of one replica: submits, the poller,
// reads and cancel requests, all on one Store.
type Service struct {
	store  Store
	caller Caller
	cfg    Config
	owner  string
	log    hclog.Logger
	now    func() time.Time
	jitter func(time.Duration) time.Duration
	m      *metrics
	pay    payloads

	wake    chan struct{}
	down    atomic.Bool // the store did not answer the last probe (Reachable)
	mu      sync.Mutex
	held    map[string]*Lease // leases this replica holds, by task id
	cancel  context.CancelFunc
	loop    sync.WaitGroup
	workers sync.WaitGroup
}

// New returns a stopped Service; Start runs its poller.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Caller == nil {
		return nil, errors.New("taskpoll: Store and Caller are required")
	}
	o.Config.defaults()
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + NewID()[len("mcp-task-"):]
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = jitter
	}
	s := &Service{
		store: o.Store, caller: o.Caller, cfg: o.Config, owner: o.Owner, log: o.Logger, now: o.Now, jitter: o.Jitter,
		pay:  payloads{maxResultBytes: o.Config.MaxResultBytes, previewChars: o.Config.ResultPreviewMaxChars},
		wake: make(chan struct{}, 1), held: make(map[string]*Lease),
	}
	m, err := newMetrics(s, o.Registerer)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// jitter spreads d uniformly over ±10 %.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

// Owner is this replica's lease owner name.
func (s *Service) Owner() string { return s.owner }

// RequestStoreTimeout bounds the store's work for one request: a submit's
// record, a task read, a list, a cancel request, the counts.
const RequestStoreTimeout = 5 * time.Second

// Store is the service's store.
func (s *Service) Store() Store { return s.store }

// Toolset names one submit/status/cancel triple of a server.
type Toolset struct {
	Name, SubmitTool, StatusTool, CancelTool string
}

// SubmitRequest is one call of a submit tool.
type SubmitRequest struct {
	User, Thread, Server string
	Toolset              Toolset
	Trace                string // Task.Trace: kept if printable ASCII of at most MaxTraceLen bytes
}

// SubmitMessage is the message of a submit's result.
const SubmitMessage = "Task is running in the background."

// Submit runs call (the upstream submit) as a durable task: the pending
// record is written first (a store that is down fails the call before
// anything reaches the upstream), then the remote handle. If the handle
// cannot be recorded after the upstream accepted, the remote task is
// cancelled and the call fails; a handle another of the caller's tasks
// already tracks (the server answered the same id twice) fails the call
// without a cancel, which would end that task. It returns the model-visible tool result:
// DeerFlow's {task_id, task_name, status: "submitted", message}, or the
// upstream's own result when that was an error.
func (s *Service) Submit(ctx context.Context, r SubmitRequest, call func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	t, raw, err := s.SubmitTask(ctx, r, call)
	if t != nil {
		return SubmitResult(t), nil
	}
	return raw, err
}

// SubmitTask is Submit for callers that show the task their own way (the
// 2026-07-28 tasks extension): it returns the durably recorded task once
// its remote handle is written; or, when the submit did not become a task,
// nil and what Submit returns then (the upstream's own error result, or
// the error).
func (s *Service) SubmitTask(ctx context.Context, r SubmitRequest, call func(context.Context) (json.RawMessage, error)) (*Task, json.RawMessage, error) {
	now := s.now()
	t := &Task{
		ID: NewID(), User: r.User, Thread: r.Thread, Server: r.Server, Name: r.Toolset.Name,
		SubmitTool: r.Toolset.SubmitTool, StatusTool: r.Toolset.StatusTool, CancelTool: r.Toolset.CancelTool, Trace: traceOf(r.Trace),
		Status: StatusPending, CreatedAt: now, UpdatedAt: now, TTL: s.cfg.Retention,
		// A submit the mux never saw through is failed by a poller after this.
		NextPollAt: now.Add(2 * s.cfg.Lease),
	}
	cctx, cancel := context.WithTimeout(ctx, RequestStoreTimeout)
	err := s.store.Create(cctx, t)
	cancel()
	if err != nil {
		if _, ok := errors.AsType[*ActiveLimitError](err); ok {
			s.m.refused.Inc()
			return nil, nil, err // nothing reached the upstream
		}
		s.m.storeErrors.Inc()
		return nil, nil, fmt.Errorf("the durable task store is unavailable, so the task was not submitted: %w", err)
	}
	raw, err := s.callHeld(ctx, t.ID, call)
	if err != nil {
		s.failPending(t.ID, truncateRunes("submit failed: "+err.Error(), MaxErrorChars))
		return nil, nil, err
	}
	rid, perr := parseSubmit(r.Toolset.SubmitTool, raw)
	if perr != nil {
		s.failPending(t.ID, truncateRunes(perr.Error(), MaxErrorChars))
		var te *ToolError
		if errors.As(perr, &te) {
			return nil, raw, nil // the upstream's own error result
		}
		return nil, nil, perr
	}
	if len(rid) > MaxRemoteIDLen {
		err := fmt.Errorf("MCP task remote_task_id must not exceed %d characters", MaxRemoteIDLen)
		s.compensate(t, rid)
		s.failPending(t.ID, err.Error())
		return nil, nil, err
	}
	next := s.now()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	rec, err := s.store.Update(uctx, t.ID, func(x *Task) error {
		if x.Status != StatusPending {
			return ErrTerminal
		}
		x.RemoteID, x.Status, x.UpdatedAt = rid, StatusSubmitted, next
		x.NextPollAt = next.Add(s.jitter(s.cfg.PollInterval))
		return nil
	})
	if err != nil {
		s.failPending(t.ID, truncateRunes(err.Error(), MaxErrorChars))
		if _, ok := errors.AsType[*DuplicateRemoteError](err); ok {
			// Cancelling this remote id would cancel the task that tracks it.
			return nil, nil, fmt.Errorf("the submitted MCP task was not recorded: %w; it was not cancelled, since that task keeps tracking it", err)
		}
		s.m.storeErrors.Inc()
		s.compensate(t, rid)
		return nil, nil, fmt.Errorf("recording the submitted MCP task failed, so it was cancelled: %w", err)
	}
	s.poke()
	return rec, nil, nil
}

// traceOf is trace if it is printable ASCII of at most MaxTraceLen bytes, else "".
func traceOf(trace string) string {
	if len(trace) > MaxTraceLen || strings.ContainsFunc(trace, func(c rune) bool { return c < ' ' || c > '~' }) {
		return ""
	}
	return trace
}

// callHeld runs a submit's call while holding its pending record: every
// half lease the record's deadline moves two leases out, as a poll lease is
// held, so it is not failed as "mcp-mux stopped while submitting" while the
// call still runs here. Only a replica that stops (or stalls for two
// leases) lets a poller fail it. The renewals end with the call, however it
// ends (a panic included), and one in flight then is cut short.
func (s *Service) callHeld(ctx context.Context, id string, call func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	hold, release := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(s.cfg.Lease / 2)
		defer tick.Stop()
		for {
			select {
			case <-hold.Done():
				return
			case <-tick.C:
				s.renewPending(hold, id)
			}
		}
	}()
	defer func() {
		release()
		<-finished
	}()
	return call(ctx)
}

// renewPending moves a pending record's deadline two leases out.
func (s *Service) renewPending(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	next := s.now().Add(2 * s.cfg.Lease)
	_, err := s.store.Update(ctx, id, func(x *Task) error {
		if x.Status != StatusPending {
			return ErrTerminal
		}
		x.NextPollAt = next
		return nil
	})
	if err != nil && !errors.Is(err, ErrTerminal) && ctx.Err() == nil {
		s.log.Debug("renewing a pending submit", "task_id", id, "err", err)
	}
}

// compensate cancels a remote task whose handle could not be recorded.
func (s *Service) compensate(t *Task, rid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args, _ := json.Marshal(map[string]string{"task_id": rid})
	if _, err := s.caller.CallTool(ctx, Call{Server: t.Server, User: t.User, Thread: t.Thread, Tool: t.CancelTool, Args: args, Task: t}); err != nil {
		s.log.Warn("cancelling an unrecorded remote MCP task failed", "server", t.Server, "task_id", t.ID, "err", err)
	}
}

// failPending marks a pending record failed (best effort: a poller fails
// it later when the store is unreachable now).
func (s *Service) failPending(id, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := s.now()
	_, err := s.store.Update(ctx, id, func(x *Task) error {
		if x.Status != StatusPending {
			return ErrTerminal
		}
		x.Status, x.Error, x.UpdatedAt, x.CompletedAt, x.NextPollAt = StatusFailed, msg, now, now, time.Time{}
		s.retain(x)
		return nil
	})
	if err != nil && !errors.Is(err, ErrTerminal) {
		s.log.Debug("marking a failed submit", "task_id", id, "err", err)
	}
}

// retain gives a record turning terminal its retention (one written
// before retention existed has none).
func (s *Service) retain(t *Task) {
	if t.Status.Terminal() && t.TTL <= 0 {
		t.TTL = s.cfg.Retention
	}
}

// poke wakes the poller.
func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Get returns a task of user, or ErrNotFound (also for another user's).
func (s *Service) Get(ctx context.Context, user, id string) (*Task, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestStoreTimeout)
	defer cancel()
	t, err := s.store.Get(ctx, id)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			s.m.storeErrors.Inc()
		}
		return nil, err
	}
	if t.User != user {
		return nil, ErrNotFound
	}
	return t, nil
}

// List returns the tasks of q (newest first).
func (s *Service) List(ctx context.Context, q Query) ([]*Task, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestStoreTimeout)
	defer cancel()
	ts, err := s.store.List(ctx, q)
	if err != nil {
		s.m.storeErrors.Inc()
	}
	return ts, err
}

// RequestCancel records a cancel request for user's task id (DeerFlow's
// cancel API: the remote cancel happens in the background, with retries).
// It supersedes a poll in flight. A terminal or already-cancelling task is
// returned unchanged.
func (s *Service) RequestCancel(ctx context.Context, user, id string) (*Task, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestStoreTimeout)
	defer cancel()
	t, err := s.Get(ctx, user, id)
	if err != nil || t.Status.Terminal() || t.CancelRequested() {
		return t, err
	}
	now := s.now()
	t, err = s.store.Update(ctx, id, func(x *Task) error {
		if x.CancelRequested() {
			return nil
		}
		x.CancelRequestedAt, x.NextPollAt, x.UpdatedAt = now, now, now
		return nil
	})
	if errors.Is(err, ErrTerminal) {
		return s.Get(ctx, user, id)
	}
	if err != nil {
		s.m.storeErrors.Inc()
		return nil, err
	}
	s.poke()
	return t, nil
}

// Counts returns the number of tasks by status (for the status page).
func (s *Service) Counts(ctx context.Context) (map[Status]int, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestStoreTimeout)
	defer cancel()
	c, err := s.store.Counts(ctx)
	if err != nil {
		s.m.storeErrors.Inc()
	}
	return c, err
}

// Subscribe calls fn with every task event of every replica; fn must not
// block.
func (s *Service) Subscribe(fn func(Event)) func() { return s.store.Subscribe(fn) }

// Ping reports whether the store is reachable now.
func (s *Service) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

// Reachable reports whether the store answered its last probe (for
// /readyz, which must not wait on the store): the running Service pings
// it every probeEvery, each ping bounded by probeTimeout.
func (s *Service) Reachable() bool { return !s.down.Load() }

// probeEvery is how often a running Service pings its store, and
// probeTimeout bounds one ping.
const (
	probeEvery   = time.Second
	probeTimeout = time.Second
)

// probe pings the store every probeEvery until ctx ends, noting the
// outcome for Reachable and logging each change.
func (s *Service) probe(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := s.store.Ping(pctx)
		cancel()
		switch wasDown := s.down.Swap(err != nil); {
		case err != nil && !wasDown && ctx.Err() == nil:
			s.log.Warn("the task store is unreachable", "err", err)
		case err == nil && wasDown:
			s.log.Info("the task store is reachable again")
		}
	}
}
