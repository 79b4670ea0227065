-- claim: KEYS due; ARGV now, expiry, owner, limit, task key prefix.
-- Returns id, epoch, d, takeover for each task claimed.
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
for _, id in ipairs(ids) do
  local k = ARGV[5] .. id
  local f = redis.call('HMGET', k, 'd', 'st', 'own', 'exp')
  if not f[1] or terminal(f[2]) then
    redis.call('ZREM', KEYS[1], id)
  elseif f[3] and tonumber(f[4]) >= now then
    redis.call('ZADD', KEYS[1], f[4], id)
  else
    local ep = redis.call('HINCRBY', k, 'ep', 1)
    redis.call('HSET', k, 'own', ARGV[3], 'exp', ARGV[2])
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    local takeover = 0
    if f[3] then takeover = 1 end
    table.insert(out, id); table.insert(out, ep); table.insert(out, f[1]); table.insert(out, takeover)
  end
end
return out
