-- sweep (one record): KEYS task, thr, usr, counts, exp, due; ARGV id, now.
local sc = redis.call('ZSCORE', KEYS[5], ARGV[1])
if not sc or tonumber(sc) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[5], ARGV[1])
local st = redis.call('HGET', KEYS[1], 'st')
if not st or not terminal(st) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('HINCRBY', KEYS[4], st, -1)
return 1
