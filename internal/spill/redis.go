package spill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// RedisOptions configure NewRedis.
type RedisOptions struct {
	Client    *storeclient.Client // shared; the Store does not close it
	KeyPrefix string
}

// Redis is the Store every replica on one Redis shares. Its keys, under
// KeyPrefix, one hash tag per caller (so the one script is single-slot on
// Cluster):
//
//	spill:{<user hash>}:<id>  the result (PX: its TTL)
//	spill:{<user hash>}       sorted set: "<id>:<bytes>" scored by expiry (ms)
type Redis struct {
	c      *storeclient.Client
	prefix string
	put    *redis.Script
}

// putLua: KEYS index, result; ARGV now ms, expiry ms, member, data, ttl
// ms, size, result key prefix. Drops the caller's expired entries, then
// their oldest past the caps, then stores.
var putLua = fmt.Sprintf(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local count, total = #members + 1, tonumber(ARGV[6])
for _, m in ipairs(members) do total = total + tonumber(string.match(m, ':(%%d+)$')) end
for _, m in ipairs(members) do
  if count <= %d and total <= %d then break end
  redis.call('ZREM', KEYS[1], m)
  redis.call('DEL', ARGV[7] .. string.match(m, '^(.*):%%d+$'))
  count, total = count - 1, total - tonumber(string.match(m, ':(%%d+)$'))
end
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return 1`, MaxPerCaller, MaxCallerBytes)

// NewRedis returns a Store on o.Client.
func NewRedis(o RedisOptions) *Redis {
	return &Redis{c: o.Client, prefix: o.KeyPrefix, put: redis.NewScript(putLua)}
}

// keys are user's index and the prefix of their results' keys.
func (s *Redis) keys(user string) (index, results string) {
	sum := sha256.Sum256([]byte(user))
	index = s.prefix + "spill:{" + hex.EncodeToString(sum[:12]) + "}"
	return index, index + ":"
}

// Put keeps data, dropping user's oldest results past the caps.
func (s *Redis) Put(ctx context.Context, user, id string, data []byte, ttl time.Duration) error {
	ttl, err := check(data, ttl)
	if err != nil {
		return err
	}
	now := time.Now()
	index, results := s.keys(user)
	err = s.put.Run(ctx, s.c, []string{index, results + id}, now.UnixMilli(), now.Add(ttl).UnixMilli(),
		id+":"+strconv.Itoa(len(data)), data, ttl.Milliseconds(), len(data), results).Err()
	if err != nil {
		return fmt.Errorf("spilling a result to Redis: %w", err)
	}
	return nil
}

// Get returns user's result id.
func (s *Redis) Get(ctx context.Context, user, id string) ([]byte, error) {
	_, results := s.keys(user)
	b, err := s.c.Get(ctx, results+id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("reading a spilled result from Redis: %w", err)
	}
	return b, nil
}
