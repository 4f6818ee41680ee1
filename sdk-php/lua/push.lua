-- push: schedule one job (delayer's PUSH) in the classic layout.
--
-- KEYS[1]  job pool          ZSET  <prefix>job_pool
-- KEYS[2]  job bucket        HASH  <prefix>job_bucket:<id>
-- KEYS[3]  scheduled counts  HASH  <prefix>scheduled_count (topic -> jobs waiting)
-- ARGV[1]  job id
-- ARGV[2]  topic
-- ARGV[3]  body (binary-safe, may be empty)
-- ARGV[4]  delay in milliseconds, integer >= 0
-- ARGV[5]  ready_max_lifetime in milliseconds, integer > 0
-- ARGV[6]  max_attempts (0: no limit), or "": not written
-- ARGV[7]  backoff, "fixed" or "exponential", with ARGV[8] backoff_ms and
--          ARGV[9] backoff_max_ms; or "" (all three): not written
-- ARGV[10] duplicate policy: "replace" (or ""; Delayer 1.x's
--          behaviour: the id's old job, on any topic, is replaced) or
--          "absent" (only if no job has the id: otherwise nothing is written)
-- ARGV[11] wake channel "<prefix>wake" (both layouts), or "": none
-- ARGV[12] traceparent, the producer's W3C trace context
--          ("00-<32 hex>-<16 hex>-<2 hex>", checked by the caller), or "":
--          not written; kept in the bucket's "traceparent"
--          field and handed back by pop, take, reserve and lookup
-- The scheduled counts (KEYS[3]) get +1 on the topic (a replaced id that was
-- waiting: -1 on its old topic). Their fields also make the topic known to
-- stats.lua; move.lua adds it to <prefix>topics.
--
-- Returns the due time written to the pool: Unix seconds with millisecond
-- precision, as a string ("1763750000.125"). With policy "absent" and the id
-- taken: {topic, due} of the job holding it, due its pool score when it is
-- still waiting, else "" (ready, reserved or dead).
--
-- "Now" is Redis's clock (TIME), not the caller's, so clients with skewed
-- clocks schedule alike. The bucket is replaced, not merged, so a re-pushed id
-- carries no stale fields; it expires delay + ready_max_lifetime from now.
-- Retry settings are only read by reserve and its kin, the traceparent only
-- handed back; leaving them out keeps the bucket exactly as Delayer 1.x
-- writes it.
-- A due time before the pool's earliest (or into an empty pool) is announced
-- on the wake channel as "<due> <topic>": a server sleeping toward a later
-- time wakes for it.
-- PUBLISH is a pcall: an ACL user without the channel still pushes (the
-- server then finds the job within timer_interval).
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local policy, wake = ARGV[10] or '', ARGV[11] or ''
if policy ~= '' and policy ~= 'replace' and policy ~= 'absent' then
  return redis.error_reply('ERR push.lua: unknown duplicate policy "' .. policy .. '"')
end
if policy == 'absent' and redis.call('EXISTS', KEYS[2]) == 1 then
  local topic = redis.pcall('HGET', KEYS[2], 'topic')
  return {type(topic) == 'string' and topic or '', redis.call('ZSCORE', KEYS[1], ARGV[1]) or ''}
end

local t = redis.call('TIME')
local delay_ms = tonumber(ARGV[4])
local due_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + delay_ms
local due = string.format('%d.%03d', math.floor(due_ms / 1000), due_ms % 1000)
local head = wake ~= '' and redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')

-- ZADD first: Redis does not roll back a script that fails half-way, and
-- ZADD is the call that can fail (a pool key of the wrong type, or Redis
-- out of memory: it refuses a script's first write then); failing first
-- leaves nothing behind. Every later write is to a key just deleted, or
-- guarded (PROTOCOL.md, "Operations").
local added = redis.pcall('ZADD', KEYS[1], due, ARGV[1])
if type(added) == 'table' then
  if string.sub(added.err, 1, 9) ~= 'WRONGTYPE' then return added end
  return redis.error_reply('WRONGTYPE ' .. shown(KEYS[1]) .. ' is a ' .. redis.call('TYPE', KEYS[1]).ok .. ', not a zset')
end
local old_topic = added == 0 and redis.pcall('HGET', KEYS[2], 'topic')
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'topic', ARGV[2], 'body', ARGV[3])
if (ARGV[6] or '') ~= '' then
  redis.call('HSET', KEYS[2], 'max_attempts', ARGV[6])
end
if (ARGV[7] or '') ~= '' then
  redis.call('HSET', KEYS[2], 'backoff', ARGV[7], 'backoff_ms', ARGV[8], 'backoff_max_ms', ARGV[9])
end
if (ARGV[12] or '') ~= '' then
  redis.call('HSET', KEYS[2], 'traceparent', ARGV[12])
end
redis.call('PEXPIRE', KEYS[2], delay_ms + tonumber(ARGV[5]))
-- The counts last, and under pcall: the job is written whatever happens to
-- them (a count hash of the wrong type is reported by the server and stats).
if type(old_topic) == 'string' and old_topic ~= '' and old_topic ~= ARGV[2] then
  local left = redis.pcall('HINCRBY', KEYS[3], old_topic, -1)
  if type(left) == 'number' and left <= 0 then redis.call('HDEL', KEYS[3], old_topic) end
end
if old_topic ~= ARGV[2] then redis.pcall('HINCRBY', KEYS[3], ARGV[2], 1) end
if head and (not head[2] or tonumber(due) < tonumber(head[2])) then
  redis.pcall('PUBLISH', wake, due .. ' ' .. ARGV[2])
end
return due
