-- touch: a worker still busy with a reserved job extends its reservation,
-- so the server does not hand the job out again while the work goes on.
--
-- KEYS[1]  reserved    ZSET  <prefix>reserved (score: deadline, Unix ms)
-- KEYS[2]  job bucket  HASH  <prefix>job_bucket:<id>
-- KEYS[3]  job pool    ZSET  <prefix>job_pool
-- ARGV[1]  job id
-- ARGV[2]  receipt from reserve, or "" for whichever reservation is current
-- ARGV[3]  ttr in milliseconds, integer >= 1: the new deadline is now + ttr
-- ARGV[4]  wake channel "<prefix>wake", or "": none (added in 2.x):
--          "<deadline> <topic>" is published when the new deadline
--          comes before the reserved set's earliest, so the server expires it
--          on time (a touch may shorten the reservation)
--
-- Returns the new deadline "s.mmm" (Redis's clock), or nil when the
-- reservation was not held (the same test as ack.lua). The deadline is set,
-- not added to, so a touch may also shorten it. attempts does not change: a
-- touch lengthens this attempt, it does not start another.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local receipt = redis.pcall('HGET', KEYS[2], 'receipt')
if type(receipt) ~= 'string' or (ARGV[2] ~= '' and receipt ~= ARGV[2])
    or not redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  return false
end
local t = redis.call('TIME')
local deadline_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
local deadline = string.format('%d.%03d', math.floor(deadline_ms / 1000), deadline_ms % 1000)
local wake = ARGV[4] or ''
local head = wake ~= '' and redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', deadline_ms), ARGV[1])
if head and (not head[2] or deadline_ms < tonumber(head[2])) then
  local topic = redis.pcall('HGET', KEYS[2], 'topic')
  if type(topic) == 'string' then redis.pcall('PUBLISH', wake, deadline .. ' ' .. topic) end
end
return deadline
