package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// Keeping the table fresh: the store's change notices, the periodic
// recheck against the records, and the idle sweep.

// changed applies a record change another replica made: the session
// ended (a load of it in flight registers nothing), or its record changed
// (the notice carries what changed; without, it is read again in the
// background).
func (t *Table) changed(c sessionstore.Change) {
	e := t.cache.changed(c.ID, c.Record, c.Ended)
	switch {
	case c.Ended:
		t.forget(c.ID)
	case e == nil:
	case c.Record != nil:
		t.apply(e, c.Record)
	default:
		t.bg.Go(func() { t.reload(c.ID) })
	}
}

// recheck checks the sessions this replica keeps against their records
// (one store round trip per few hundred): a session whose record is gone
// (its end went unheard, or it expired) is let go of, one whose record
// is newer is read again. It runs every recheckEvery and when the store
// reconnects (changes and ends may have gone unheard while its link was
// down), so that a DELETE answered 204 means 404 here within recheckEvery
// even when its notice was lost.
func (t *Table) recheck() {
	if _, local := t.store.(*sessionstore.Local); local {
		return // in process, every end is seen at once
	}
	entries := t.cache.all()
	if len(entries) == 0 {
		return
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.st.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	revs, err := t.store.Revisions(ctx, ids)
	if err != nil {
		t.log.Debug("checking sessions against their records", "err", err)
		return
	}
	for _, e := range entries {
		id := e.st.ID
		rev, ok := revs[id]
		switch {
		case !ok:
			t.log.Debug("letting go of a session whose record is gone", "session", id)
			t.forget(id)
		case rev > e.rev.Load():
			t.reload(id)
		}
	}
}

// refresh reads e's record again and applies it; it reports whether the
// record may hold what e lacked: a newer revision, or promotions (a
// change made here since may have moved e's revision past one whose
// notice is still on its way). In process there is nothing to read.
func (t *Table) refresh(e *entry) bool {
	if _, local := t.store.(*sessionstore.Local); local {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := t.store.Get(ctx, e.st.ID)
	if err != nil {
		return false
	}
	newer := rec.Rev > e.rev.Load() || len(rec.Promoted) > 0
	t.apply(e, rec)
	return newer
}

// reload reads the record of id again and applies it to this replica's
// session; it reports whether the session is still there.
func (t *Table) reload(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec, err := t.store.Get(ctx, id)
	if errors.Is(err, sessionstore.ErrNotFound) {
		t.forget(id)
		return false
	}
	e := t.cache.get(id)
	if err != nil || e == nil {
		return e != nil
	}
	t.apply(e, rec)
	return true
}

// Run reaps the table until ctx ends: it sweeps the sessions at least
// every second (Sweep), so that a reload's new idle timeout applies soon,
// and rechecks them against their records every recheckEvery (recheck).
func (t *Table) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	checked := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-timer.C:
			timeout := t.Sweep(now)
			next := min(max(min(timeout, t.threadless)/8, 10*time.Millisecond), time.Second, t.recheckEvery)
			if now.Sub(checked) >= t.recheckEvery {
				checked = now
				t.bg.Go(t.recheck)
			}
			timer.Reset(next)
		}
	}
}

// Sweep lets go of the sessions idle here at now for longer than
// inbound.session_idle_timeout_seconds (of the config applied now; by
// then their records have expired too, unless another replica kept them
// in use), and releases the stdio call sessions of idle sessions that name
// no thread (Options.ThreadlessIdle). It returns the idle timeout it applied.
func (t *Table) Sweep(now time.Time) time.Duration {
	rt := t.rt.Load()
	timeout := rt.Config.Inbound.SessionIdleTimeout
	if timeout <= 0 {
		timeout = DefaultIdleTimeout
	}
	// In process, the sessions of the only replica end here (their records
	// do not expire on their own); shared, their records expire TTL after
	// their last use on any replica.
	local, _ := t.store.(*sessionstore.Local)
	if local == nil {
		t.store.SetTTL(timeout)
	}
	for _, e := range t.cache.all() {
		st := e.st
		idle := now.Sub(time.Unix(0, st.LastSeen.Load()))
		switch {
		case idle > timeout:
			t.log.Debug("closing idle session", "session", st.ID)
			if local != nil {
				_ = local.Delete(context.Background(), st.ID)
				t.tel.SessionEnded(e.started, st.Protocol)
			}
			t.forget(st.ID)
		case idle > t.threadless && e.streams.Load() == 0 && !st.Busy() && st.ReleaseOwnThread():
			for _, b := range rt.Backends {
				if b.Config != nil && b.Config.Type == config.TypeStdio {
					b.Up.ReleaseIdleThread(st.ID)
				}
			}
		}
	}
	return timeout
}
