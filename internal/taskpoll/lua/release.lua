-- release: KEYS task, due; ARGV id, owner, epoch, now.
local f = redis.call('HMGET', KEYS[1], 'st', 'own', 'ep')
if not f[1] or f[2] ~= ARGV[2] or f[3] ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[1], 'own', 'exp')
if not terminal(f[1]) then redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1]) end
return 1
