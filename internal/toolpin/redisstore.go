package toolpin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// RedisOptions configure NewRedisStore.
type RedisOptions struct {
	Client    *storeclient.Client // shared; Close leaves it open
	KeyPrefix string
}

// RedisStore is the Store shared by replicas: one hash per server,
//
//	pins:{<server>}   h:<tool> → the pin (JSON), d:<tool> → its definition, n → how many pins
//
// every command and script on that one key, so all run on Redis Cluster.
type RedisStore struct {
	c      *storeclient.Client
	prefix string
	addLua *redis.Script
}

var _ Store = (*RedisStore)(nil)

// addScript: KEYS hash; ARGV h-field, record, d-field, definition ("" for
// none), max pins. Returns the pin in force, or false when full. The
// field n counts the pins.
const addScript = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return cur end
if tonumber(redis.call('HGET', KEYS[1], 'n') or '0') >= tonumber(ARGV[5]) then return false end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], ARGV[3], ARGV[4]) end
return ARGV[2]`

// NewRedisStore returns a Store on o.Client.
func NewRedisStore(o RedisOptions) *RedisStore {
	return &RedisStore{c: o.Client, prefix: o.KeyPrefix, addLua: redis.NewScript(addScript)}
}

func (s *RedisStore) key(server string) string { return s.prefix + "pins:{" + server + "}" }

// Close leaves the shared client open.
func (s *RedisStore) Close() error { return nil }

func (s *RedisStore) records(ctx context.Context, server string, tools []string) (map[string]*Record, error) {
	out := make(map[string]*Record, len(tools))
	if len(tools) == 0 {
		return out, nil
	}
	fields := make([]string, len(tools))
	for i, t := range tools {
		fields[i] = "h:" + t
	}
	vals, err := s.c.HMGet(ctx, s.key(server), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the pins of %q: %w", server, err)
	}
	for i, v := range vals {
		if str, ok := v.(string); ok {
			if r := decodeRecord([]byte(str)); r != nil {
				out[tools[i]] = r
			}
		}
	}
	return out, nil
}

func (s *RedisStore) add(ctx context.Context, server, tool string, rec *Record, def []byte, max int) (*Record, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding a pin: %w", err)
	}
	v, err := s.addLua.Run(ctx, s.c, []string{s.key(server)}, "h:"+tool, b, "d:"+tool, def, strconv.Itoa(max)).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrFull
	case err != nil:
		return nil, fmt.Errorf("pinning a tool of %q: %w", server, err)
	}
	if r := decodeRecord([]byte(v)); r != nil {
		return r, nil
	}
	return rec, nil
}

func (s *RedisStore) definition(ctx context.Context, server, tool string) ([]byte, error) {
	v, err := s.c.HGet(ctx, s.key(server), "d:"+tool).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading a pinned definition of %q: %w", server, err)
	}
	return v, nil
}

func (s *RedisStore) put(ctx context.Context, server, tool string, rec *Record, def []byte) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding a pin: %w", err)
	}
	p := s.c.TxPipeline()
	p.HSet(ctx, s.key(server), "h:"+tool, b) // an accepted tool was pinned: n stays
	if def != nil {
		p.HSet(ctx, s.key(server), "d:"+tool, def)
	} else {
		p.HDel(ctx, s.key(server), "d:"+tool)
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("pinning a tool of %q: %w", server, err)
	}
	return nil
}
