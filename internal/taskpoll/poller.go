package taskpoll

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The poller: one loop per replica claims due tasks (never more than
// max_concurrent_polls in flight), and one goroutine per claimed task calls
// its status or cancel tool and applies the outcome under the lease.
//
// Scheduling follows DeerFlow (§6.8), with ±10 % jitter on every delay:
// after a snapshot the next poll is poll_after_seconds or poll_interval
// (at least input_required_poll_interval while input is required, at most
// 24 h); after a transient error min(poll_interval·2^errors, max_backoff),
// errors counted before this one. A call is bounded by its lease, so a hung
// upstream never holds a task past it.
//
// The same loop removes terminal records whose retention ended (Sweep), at
// most sweepBatch per pass and a pass every sweepEvery (at once again
// while a pass finds a full batch). Terminal tasks are never in the due
// index, so they are never polled; an active task is polled until it
// finishes, however long that takes.

// idleWait is how long the loop sleeps when nothing was due.
func (s *Service) idleWait() time.Duration { return min(s.cfg.PollInterval/4, time.Second) }

// Start runs the poller until Stop. Its first pass runs at once and picks
// up tasks whose leases expired while no replica held them.
func (s *Service) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.loop.Go(func() { s.run(ctx) })
	s.loop.Go(func() { s.probe(ctx) })
}

// Stop ends the poller: claiming stops, calls in flight are cancelled, and
// this replica's leases are released so another replica takes the tasks at
// once. ctx bounds the release.
func (s *Service) Stop(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.loop.Wait()
	s.workers.Wait()
	s.mu.Lock()
	held := make([]*Lease, 0, len(s.held))
	for _, l := range s.held {
		held = append(held, l)
	}
	clear(s.held)
	s.mu.Unlock()
	if err := s.store.Release(ctx, held, s.now()); err != nil {
		s.m.storeErrors.Inc()
		return err
	}
	return nil
}

func (s *Service) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// sweepBatch bounds the records one sweep pass removes.
const sweepBatch = 500

// sweepEvery is the time between sweep passes: a quarter of the retention,
// within 250 ms .. 1 min.
func (s *Service) sweepEvery() time.Duration {
	return min(max(s.cfg.Retention/4, 250*time.Millisecond), time.Minute)
}

// sweep runs a pass when one is due and returns when the next is.
func (s *Service) sweep(ctx context.Context, due time.Time) time.Time {
	now := s.now()
	if now.Before(due) {
		return due
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	n, err := s.store.Sweep(sctx, now, sweepBatch)
	s.m.swept.Add(float64(n))
	switch {
	case err != nil && ctx.Err() == nil:
		s.m.storeErrors.Inc()
		s.log.Warn("removing expired MCP task records failed; retrying later", "err", err)
	case n == sweepBatch:
		return now // more are due
	}
	return now.Add(s.sweepEvery())
}

// run is the poll loop: sweep when due, claim what the free workers can
// take, then wait for a wake-up, the next interval or the next sweep.
func (s *Service) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var nextSweep time.Time
	for {
		nextSweep = s.sweep(ctx, nextSweep)
		wait := s.claimDue(ctx, min(s.idleWait(), max(nextSweep.Sub(s.now()), 0)))
		if !pause(ctx, s.wake, timer, wait) {
			return
		}
	}
}

// claimDue leases as many due tasks as there are free workers and starts
// them; it returns how long to wait next: wait, the poll interval after a
// store error, or 0 when more may be due.
func (s *Service) claimDue(ctx context.Context, wait time.Duration) time.Duration {
	free := s.cfg.MaxConcurrentPolls - s.inFlight()
	if free <= 0 {
		return wait
	}
	ls, err := s.store.Claim(ctx, s.owner, s.now(), s.cfg.Lease, free)
	if err != nil && ctx.Err() == nil {
		s.m.storeErrors.Inc()
		s.log.Warn("MCP task poll failed; retrying next interval", "err", err)
		wait = s.cfg.PollInterval
	}
	for _, l := range ls {
		s.start(ctx, l)
	}
	if err == nil && len(ls) == free {
		wait = 0 // more may be due
	}
	return wait
}

// pause waits for wait (unless 0), a wake-up or ctx's end, and reports
// whether the loop goes on.
func pause(ctx context.Context, wake <-chan struct{}, timer *time.Timer, wait time.Duration) bool {
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer.Reset(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-timer.C:
	}
	return true
}

func (s *Service) start(ctx context.Context, l *Lease) {
	if l.Takeover {
		s.m.takeovers.Inc()
	}
	s.mu.Lock()
	s.held[l.Task.ID] = l
	s.mu.Unlock()
	s.workers.Go(func() {
		defer s.poke()
		s.work(ctx, l)
		if ctx.Err() != nil {
			return // keep the lease listed: Stop releases it
		}
		s.mu.Lock()
		if s.held[l.Task.ID] == l {
			delete(s.held, l.Task.ID)
		}
		s.mu.Unlock()
	})
}

// work does one claimed task's poll or cancel and applies the outcome. A
// failure to record it leaves the lease to expire.
func (s *Service) work(ctx context.Context, l *Lease) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("Unexpected MCP task poll failure; the lease will expire for recovery", "task_id", l.Task.ID, "panic", p)
		}
	}()
	t := l.Task
	var next *Task
	switch {
	case t.Status == StatusPending:
		next = s.terminal(t, StatusFailed, "The MCP task submit did not complete (mcp-mux stopped while submitting); the remote task's state is unknown")
	case t.CancelRequested():
		next = s.cancelOnce(ctx, l)
	default:
		next = s.pollOnce(ctx, l)
	}
	if next == nil || ctx.Err() != nil {
		return
	}
	s.retain(next)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	ok, err := s.store.Apply(actx, l, next, s.now())
	if err != nil {
		s.m.storeErrors.Inc()
		s.log.Warn("recording an MCP task poll failed; the lease will expire for recovery", "task_id", t.ID, "err", err)
		return
	}
	if !ok {
		s.m.discarded.Inc()
		s.log.Debug("Discarded MCP task poll result after lease ownership changed or expired", "task_id", t.ID)
	}
}

// storeTimeout bounds one store write of the poller.
const storeTimeout = 10 * time.Second

func (s *Service) callTask(ctx context.Context, l *Lease, tool string) (json.RawMessage, error) {
	ctx, cancel := context.WithDeadline(ctx, l.Expires)
	defer cancel()
	args, _ := json.Marshal(map[string]string{"task_id": l.Task.RemoteID})
	return s.caller.CallTool(ctx, Call{Server: l.Task.Server, User: l.Task.User, Thread: l.Task.Thread, Tool: tool, Args: args, Task: l.Task})
}

// pollOnce calls the status tool and returns the record to apply (nil when
// the poll was cut short by shutdown).
func (s *Service) pollOnce(ctx context.Context, l *Lease) *Task {
	t := l.Task
	s.m.polls.Inc()
	raw, err := s.callTask(ctx, l, t.StatusTool)
	if ctx.Err() != nil {
		return nil
	}
	var snap *snapshot
	if err == nil {
		snap, err = parseStatus(t.StatusTool, t.RemoteID, raw, false)
	}
	now := s.now()
	n := t.Clone()
	n.PollAttempts++
	n.LastPolledAt, n.UpdatedAt = now, now
	if err == nil {
		err = s.pay.normalize(snap, n)
	}
	switch {
	case err == nil:
		return s.applySnapshot(n, snap, now)
	case isProtocol(err):
		s.m.pollErrors.Inc()
		return s.terminal(n, StatusFailed, err.Error())
	default:
		s.m.pollErrors.Inc()
		return s.transient(n, err, now)
	}
}

// applySnapshot records a successful poll and schedules the next one.
func (s *Service) applySnapshot(n *Task, snap *snapshot, now time.Time) *Task {
	changed := n.Status != snap.Status || n.Degraded
	n.Status, n.RemoteFailure = snap.Status, snap.Status == StatusFailed
	n.ConsecutiveErrors, n.LastPollError, n.Degraded = 0, "", false
	n.PollInterval = snap.PollAfter
	if n.Status.Terminal() {
		n.CompletedAt, n.NextPollAt = now, time.Time{}
	} else {
		interval := s.cfg.PollInterval
		if snap.PollAfter > 0 {
			interval = snap.PollAfter
		}
		if n.Status == StatusInputRequired {
			interval = max(interval, s.cfg.InputRequiredPollInterval)
		}
		n.NextPollAt = now.Add(s.jitter(min(interval, MaxPollAfter)))
	}
	if changed {
		n.Version++
	}
	return n
}

// transient records a retryable failure with exponential backoff.
func (s *Service) transient(n *Task, err error, now time.Time) *Task {
	n.NextPollAt = now.Add(s.jitter(s.backoff(n.ConsecutiveErrors)))
	n.ConsecutiveErrors++
	n.LastPollError = truncateRunes(err.Error(), MaxErrorChars)
	if !n.Degraded && n.ConsecutiveErrors >= s.cfg.DegradedAfterErrors {
		n.Degraded = true
		n.Version++
	}
	return n
}

// backoff is min(poll_interval·2^min(errors,16), max_poll_backoff).
func (s *Service) backoff(errs int) time.Duration {
	return min(s.cfg.PollInterval*time.Duration(1<<min(errs, 16)), s.cfg.MaxPollBackoff)
}

func (s *Service) terminal(t *Task, st Status, msg string) *Task {
	n := t.Clone()
	now := s.now()
	n.Status, n.Error = st, truncateRunes(msg, MaxErrorChars)
	n.UpdatedAt, n.CompletedAt, n.NextPollAt = now, now, time.Time{}
	n.Version++
	return n
}

// cancelOnce calls the cancel tool; failures are retried with backoff.
func (s *Service) cancelOnce(ctx context.Context, l *Lease) *Task {
	t := l.Task
	raw, err := s.callTask(ctx, l, t.CancelTool)
	if ctx.Err() != nil {
		return nil
	}
	var snap *snapshot
	if err == nil {
		snap, err = parseStatus(t.CancelTool, t.RemoteID, raw, true)
	}
	now := s.now()
	n := t.Clone()
	n.CancelAttempts++
	n.UpdatedAt = now
	if err == nil {
		err = s.pay.normalize(snap, n)
	}
	switch {
	case err == nil:
		n.Status, n.CompletedAt, n.NextPollAt = snap.Status, now, time.Time{}
		n.RemoteFailure = snap.Status == StatusFailed
		n.LastCancelError = ""
		n.Version++
		return n
	case isProtocol(err):
		var pe *ProtocolError
		errors.As(err, &pe)
		return s.terminal(n, StatusFailed, pe.Msg)
	default:
		n.LastCancelError = truncateRunes(err.Error(), MaxErrorChars)
		n.NextPollAt = now.Add(s.jitter(s.backoff(n.CancelAttempts - 1)))
		return n
	}
}
