-- ARGV[9] is the publish command: PUBLISH, or SPUBLISH on Cluster (the
-- channel then is the shard's, in its slot).
-- create: KEYS task, due, thr, usr, counts, exp; ARGV id, d, st, due,
-- created, event, channel, expiry.
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
redis.call('HSET', KEYS[1], 'd', ARGV[2], 'st', ARGV[3], 'ep', 0)
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
redis.call('HINCRBY', KEYS[5], ARGV[3], 1)
if tonumber(ARGV[4]) >= 0 then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1]) end
if tonumber(ARGV[8]) >= 0 then redis.call('ZADD', KEYS[6], ARGV[8], ARGV[1]) end
if ARGV[6] ~= '' then redis.call(ARGV[9], ARGV[7], ARGV[6]) end
return 'ok'
