package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
)

// sweepEvery is how often idle in-process buckets are dropped.
const sweepEvery = time.Minute

// bucket is one in-process rate budget: a token bucket of Calls tokens
// refilled at Calls per Per.
type bucket struct {
	lim   *rate.Limiter
	calls int
	per   time.Duration
	last  time.Time
}

// allowLocal takes one call from the in-process budget key of r; when
// refused, retry is how long until a call is allowed.
func (l *Limiter) allowLocal(key string, r *Rule) (ok bool, retry time.Duration) {
	now := time.Now()
	every := rate.Every(r.Per / time.Duration(r.Calls))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.buckets[key]
	switch {
	case b == nil:
		b = &bucket{lim: rate.NewLimiter(every, r.Calls), calls: r.Calls, per: r.Per}
		l.buckets[key] = b
	case b.calls != r.Calls || b.per != r.Per: // the rule changed on a reload
		b.lim.SetLimitAt(now, every)
		b.lim.SetBurstAt(now, r.Calls)
		b.calls, b.per = r.Calls, r.Per
	}
	b.last = now
	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - b.lim.TokensAt(now)
	return false, time.Duration(missing * float64(time.Second) / float64(every))
}

// sweep drops, once a sweepEvery, the buckets idle for longer than their
// period: full again, they are the same as new ones. l.mu is held.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < sweepEvery {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.last) > b.per {
			delete(l.buckets, k)
		}
	}
}
