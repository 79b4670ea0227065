-- Compare-and-set of a session record's fields: writes them and announces
-- the change on the bus only if the record is still at the revision the
-- caller read.
-- KEYS[1] the record (a hash)
-- ARGV[1] the revision as read, ARGV[2] the bus channel, ARGV[3] the
-- change notice, ARGV[4] the publish command (PUBLISH, or SPUBLISH on
-- Cluster), ARGV[5..] field, value pairs (an empty value removes the
-- field)
-- Returns nil (no such session), 1 (written) or, when it changed meanwhile,
-- the record's fields as they are now (HGETALL).
local n = redis.call('HGET', KEYS[1], 'n')
if not n then return false end
if n ~= ARGV[1] then return redis.call('HGETALL', KEYS[1]) end
for i = 5, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call(ARGV[4], ARGV[2], ARGV[3])
return 1
