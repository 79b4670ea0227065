package storeclient

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// reserveLua: KEYS zset; ARGV id, now ms, expiry ms, max. 1: added, 0: full.
const reserveLua = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1`

// Reserve adds id to the sorted set key, scored by its expiry exp, unless
// the set already holds max members that have not expired at now (those
// that have are dropped first); the set lives as long as its last member.
// It reports whether id was added: one script on one key, so a bound
// shared by every replica holds on Cluster too.
func (c *Client) Reserve(ctx context.Context, key, id string, now, exp time.Time, max int) (bool, error) {
	ok, err := redis.NewScript(reserveLua).Run(ctx, c, []string{key}, id,
		strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(exp.UnixMilli(), 10), max).Int()
	return ok == 1, err
}
