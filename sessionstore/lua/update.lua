-- Compare-and-set of a session record: writes the new record (keeping its
-- TTL) and announces the change on the bus only if the record is still
-- the one the caller read.
-- KEYS[1] the record
-- ARGV[1] the record as read, ARGV[2] the new record, ARGV[3] the bus
-- channel, ARGV[4] the change message
-- Returns nil (no such session), 1 (written) or the current record.
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
if cur ~= ARGV[1] then return cur end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
