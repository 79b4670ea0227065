-- Adds values to one of a session's lists within its bound and tells the
-- replicas what was added: a notice of the record's fields and the values
-- (or, past ARGV[5] bytes of them, that the record must be read again).
-- KEYS[1] the record (a hash), KEYS[2] the list
-- ARGV[1] 'z' (a sorted set keeping the newest ARGV[2], by first use) or
-- 's' (a set taking no more past ARGV[2]), ARGV[2] the bound, ARGV[3] now
-- (ms), ARGV[4] the notice's member for the values ('' for no notice and
-- no new revision), ARGV[5] the most bytes of values a notice carries,
-- ARGV[6] the bus channel, ARGV[7] the session id, ARGV[8] this replica,
-- ARGV[9] the publish command (PUBLISH, or SPUBLISH on Cluster),
-- ARGV[10..] the values
-- Returns nil (no such session) or {values added, the record's fields...}.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local max = tonumber(ARGV[2])
local added, size = {}, 0
for i = 10, #ARGV do
  local new
  if ARGV[1] == 'z' then
    new = redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[i]) == 1
  else
    new = redis.call('SCARD', KEYS[2]) < max and redis.call('SADD', KEYS[2], ARGV[i]) == 1
  end
  if new then
    added[#added + 1] = ARGV[i]
    size = size + #ARGV[i]
  end
end
if ARGV[1] == 'z' then
  local n = redis.call('ZCARD', KEYS[2])
  if n > max then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - max - 1) end
end
if #added > 0 then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
  if ARGV[4] ~= '' then
    local rev = redis.call('HINCRBY', KEYS[1], 'n', 1)
    local f = redis.call('HMGET', KEYS[1], 'v', 'l', 'h')
    local d = {v = f[1] or nil, l = f[2] or nil, h = f[3] or nil}
    if size <= tonumber(ARGV[5]) then d[ARGV[4]] = added else d.x = true end
    redis.call(ARGV[9], ARGV[6], cjson.encode({k = 'ch', s = ARGV[7], n = rev, f = ARGV[8], d = d}))
  end
end
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, #added)
return out
