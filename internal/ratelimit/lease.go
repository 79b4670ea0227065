package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Calls in flight shared through Redis.
//
// Each budget is a sorted set whose members are the leases of the calls
// holding a slot, scored by when the lease expires (Unix ms). Taking a
// slot is one MULTI/EXEC: drop the expired leases, add ours, count. The
// count includes every lease added before ours and still held, so a lease
// whose count is at most the cap is admitted and one above it is removed
// again (refused): admitted leases never exceed the cap. A refused lease
// counts for the instant before its removal, so under a burst a call may
// be refused while a slot is free, never admitted past the cap. Each
// replica renews its own leases every LeaseTTL/3 (one pipeline); a killed
// replica's leases expire within LeaseTTL and free their slots. Expiry
// compares the replicas' clocks, so skew shortens or lengthens that wait.

// slot is one calls-in-flight slot a call holds: in process (member "")
// or a lease in the sorted set key.
type slot struct {
	key, member string
}

// leaseTable is this replica's leases, renewed until released.
type leaseTable struct {
	id  string // this replica, in lease names
	seq atomic.Uint64

	mu   sync.Mutex
	held map[slot]struct{}
}

func (t *leaseTable) init() {
	var b [8]byte
	_, _ = rand.Read(b[:])
	t.id = hex.EncodeToString(b[:])
	t.held = map[slot]struct{}{}
}

// acquireShared takes a slot of the sorted set key, capped at limit.
func (l *Limiter) acquireShared(ctx context.Context, key string, limit int) (slot, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	s := slot{key: key, member: l.leases.id + ":" + strconv.FormatUint(l.leases.seq.Add(1), 36)}
	now := time.Now()
	pipe := l.rdb.TxPipeline()
	pipe.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.UnixMilli(), 10))
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(l.opts.LeaseTTL).UnixMilli()), Member: s.member})
	n := pipe.ZCard(ctx, key)
	pipe.PExpire(ctx, key, 2*l.opts.LeaseTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return slot{}, false, err
	}
	l.storeOK()
	if n.Val() > int64(limit) {
		l.dropLease(s)
		return slot{}, false, nil
	}
	l.leases.mu.Lock()
	l.leases.held[s] = struct{}{}
	l.leases.mu.Unlock()
	return s, true, nil
}

// release returns slot s.
func (l *Limiter) release(s slot) {
	if s.member == "" {
		l.mu.Lock()
		if n := l.inflight[s.key] - 1; n > 0 {
			l.inflight[s.key] = n
		} else {
			delete(l.inflight, s.key)
		}
		l.mu.Unlock()
		return
	}
	l.leases.mu.Lock()
	delete(l.leases.held, s)
	l.leases.mu.Unlock()
	l.dropLease(s)
}

// dropLease removes lease s from its set; one that cannot be removed now
// expires.
func (l *Limiter) dropLease(s slot) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if err := l.rdb.ZRem(ctx, s.key, s.member).Err(); err != nil {
		l.log.Debug("limits: a lease is left to expire", "err", err)
	}
}

// renew extends this replica's leases every LeaseTTL/3, and probes the
// store for Health every probeEvery, until Close.
func (l *Limiter) renew() {
	defer close(l.done)
	t := time.NewTicker(l.opts.LeaseTTL / 3)
	defer t.Stop()
	p := time.NewTicker(probeEvery)
	defer p.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.renewOnce()
		case <-p.C:
			l.probe()
		}
	}
}

// renewOnce extends every held lease by LeaseTTL, in one pipeline (ZADD
// XX: a lease released meanwhile is not brought back).
func (l *Limiter) renewOnce() {
	l.leases.mu.Lock()
	held := make([]slot, 0, len(l.leases.held))
	for s := range l.leases.held {
		held = append(held, s)
	}
	l.leases.mu.Unlock()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	score := float64(time.Now().Add(l.opts.LeaseTTL).UnixMilli())
	pipe := l.rdb.Pipeline()
	for _, s := range held {
		pipe.ZAddXX(ctx, s.key, redis.Z{Score: score, Member: s.member})
		pipe.PExpire(ctx, s.key, 2*l.opts.LeaseTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		l.log.Warn("limits: renewing leases", "leases", len(held), "err", err)
	}
}
