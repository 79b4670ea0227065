package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// RedisOptions configure NewRedisStore.
type RedisOptions struct {
	Client    *storeclient.Client // shared; Close leaves it open
	KeyPrefix string
}

// RedisStore is the Store shared by replicas. Its keys, under KeyPrefix:
//
//	appr:r:{<id>}         hash: rec (the record as asked, JSON), state, exp (ms), by, reason, decided (ms)
//	appr:b:{<binding>}    the id of the latest request of a binding
//	appr:{u:<user hash>}  sorted set: the caller's pending ids, scored by expiry (ms)
//	appr:{p}              sorted set: every pending id, scored by expiry (ms)
//
// Each script touches one key, so all run on Redis Cluster; a record
// lives (PX) until keepAfter past its expiry.
type RedisStore struct {
	c      *storeclient.Client
	prefix string

	decideScript, takeScript *redis.Script
}

var _ Store = (*RedisStore)(nil)

// decideLua: KEYS record; ARGV now ms, state, by, reason.
const decideLua = `
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return 'none' end
if st ~= 'pending' then return 'decided' end
if tonumber(redis.call('HGET', KEYS[1], 'exp')) <= tonumber(ARGV[1]) then return 'expired' end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'by', ARGV[3], 'reason', ARGV[4], 'decided', ARGV[1])
return 'ok'`

// takeLua: KEYS record; ARGV now ms. 1: taken.
const takeLua = `
if redis.call('HGET', KEYS[1], 'state') ~= 'approved' then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'exp')) <= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'used')
return 1`

// NewRedisStore returns a Store on o.Client.
func NewRedisStore(o RedisOptions) *RedisStore {
	return &RedisStore{c: o.Client, prefix: o.KeyPrefix,
		decideScript: redis.NewScript(decideLua), takeScript: redis.NewScript(takeLua)}
}

func (s *RedisStore) record(id string) string { return s.prefix + "appr:r:{" + id + "}" }
func (s *RedisStore) binding(b string) string { return s.prefix + "appr:b:{" + b + "}" }
func (s *RedisStore) all() string             { return s.prefix + "appr:{p}" }
func (s *RedisStore) userSet(user string) string {
	sum := sha256.Sum256([]byte(user))
	return s.prefix + "appr:{u:" + hex.EncodeToString(sum[:12]) + "}"
}

// Close leaves the shared client open.
func (s *RedisStore) Close() error { return nil }

func (s *RedisStore) create(ctx context.Context, rec *Record, maxUser, maxAll int, now time.Time) (*Record, error) {
	id, err := s.c.Get(ctx, s.binding(rec.Binding)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	if id != "" {
		if old, err := s.get(ctx, id); err != nil {
			return nil, err
		} else if old != nil && old.State != Used && old.Live(now) {
			return old, nil
		}
	}
	if err := s.reserve(ctx, rec, maxUser, maxAll, now); err != nil {
		return nil, err
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	keep := ttl(rec, now)
	p := s.c.TxPipeline()
	p.HSet(ctx, s.record(rec.ID), "rec", body, "state", Pending, "exp", strconv.FormatInt(rec.Expires.UnixMilli(), 10))
	p.PExpire(ctx, s.record(rec.ID), keep)
	if _, err := p.Exec(ctx); err != nil {
		return nil, err
	}
	if err := s.c.Set(ctx, s.binding(rec.Binding), rec.ID, keep).Err(); err != nil {
		return nil, err
	}
	return rec, nil
}

// reserve counts rec in its caller's and the fleet's pending sets.
func (s *RedisStore) reserve(ctx context.Context, rec *Record, maxUser, maxAll int, now time.Time) error {
	ok, err := s.c.Reserve(ctx, s.userSet(rec.User), rec.ID, now, rec.Expires, maxUser)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrTooManyUser
	}
	ok, err = s.c.Reserve(ctx, s.all(), rec.ID, now, rec.Expires, maxAll)
	if err == nil && ok {
		return nil
	}
	_ = s.c.ZRem(ctx, s.userSet(rec.User), rec.ID).Err() // best effort: it expires anyway
	if err != nil {
		return err
	}
	return ErrTooMany
}

func (s *RedisStore) get(ctx context.Context, id string) (*Record, error) {
	h, err := s.c.HGetAll(ctx, s.record(id)).Result()
	if err != nil || len(h) == 0 {
		return nil, err
	}
	r := decode([]byte(h["rec"]))
	if r == nil {
		return nil, nil
	}
	r.State, r.By, r.Reason = h["state"], h["by"], h["reason"]
	if ms, err := strconv.ParseInt(h["decided"], 10, 64); err == nil {
		r.Decided = time.UnixMilli(ms).UTC()
	}
	return r, nil
}

func (s *RedisStore) decide(ctx context.Context, id, state, by, reason string, now time.Time) (*Record, error) {
	res, err := s.decideScript.Run(ctx, s.c, []string{s.record(id)}, now.UnixMilli(), state, by, reason).Text()
	if err != nil {
		return nil, err
	}
	if res == "none" {
		return nil, ErrNotFound
	}
	rec, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, ErrNotFound
	}
	switch res {
	case "decided":
		return rec, ErrDecided
	case "expired":
		return rec, ErrExpired
	}
	// Best effort: a decided id no longer counts (listing skips it anyway).
	_ = s.c.ZRem(ctx, s.userSet(rec.User), id).Err()
	_ = s.c.ZRem(ctx, s.all(), id).Err()
	return rec, nil
}

func (s *RedisStore) take(ctx context.Context, id string, now time.Time) (bool, error) {
	n, err := s.takeScript.Run(ctx, s.c, []string{s.record(id)}, now.UnixMilli()).Int()
	return n == 1, err
}

func (s *RedisStore) pending(ctx context.Context, now time.Time, n int) ([]*Record, int, error) {
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	ids, err := s.c.ZRangeByScore(ctx, s.all(), &redis.ZRangeBy{Min: "(" + ms, Max: "+inf"}).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("listing: %w", err)
	}
	var out []*Record
	for _, id := range ids {
		r, err := s.get(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if r != nil && r.State == Pending && r.Live(now) {
			out = append(out, r)
		}
	}
	total := len(out)
	sortOldest(out)
	if len(out) > n {
		out = out[:n]
	}
	return out, total, nil
}
