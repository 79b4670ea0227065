-- Appends one message to a session's event log and publishes it on the
-- bus, where the replica following the session's GET stream takes it.
-- KEYS[1] the record, KEYS[2] the log
-- ARGV[1] the message (JSON), ARGV[2] ttl (ms), ARGV[3] log length,
-- ARGV[4] the bus channel, ARGV[5] the session id, ARGV[6] the publish
-- command (PUBLISH, or SPUBLISH on Cluster)
-- Returns nil (no such session) or the event's id.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'd', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call(ARGV[6], ARGV[4], '{"k":"ev","s":"' .. ARGV[5] .. '","i":"' .. id .. '","d":' .. ARGV[1] .. '}')
return id
