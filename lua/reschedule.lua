-- reschedule: change the due time of a job that is still waiting.
--
-- KEYS[1]  job pool    ZSET  <prefix>job_pool
-- KEYS[2]  job bucket  HASH  <prefix>job_bucket:<id>
-- ARGV[1]  job id
-- ARGV[2]  new delay from now in milliseconds, integer >= 0
-- ARGV[3]  wake channel "<prefix>wake" (both layouts), or "": none
--          ("<due> <topic>" published when the new due time comes before the
--          pool's earliest, as push.lua does; the topic read from the bucket)
-- ARGV[4]  flow-pool prefix "<prefix>flow_pool:" (classic layout), or "" (or
--          absent): none (the per-topic layout's held jobs stay in the pool).
--          A job not in KEYS[1] but set aside in "<ARGV[4]><bucket's topic>"
--          (its topic paused or rate limited) leaves that ZSET and is added
--          to KEYS[1] at the new due time; it was counted already, so no count
--          changes. A flow pool of the wrong type counts as not holding it.
--
-- Returns the new due time "s.mmm", or nil when the job is not waiting (never
-- pushed, already due and moved, reserved, dead, or removed).
--
-- The bucket's due field (kept for the ready-queue age) follows the new due
-- time. A bucket with a TTL keeps the same lifetime after its due time, so its
-- TTL moves with the due time. A bucket without one (a job reserved before)
-- stays without.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local old = redis.call('ZSCORE', KEYS[1], ARGV[1])
local aside = ARGV[4] or ''
local held = nil -- the flow pool holding the job, when not in KEYS[1]
if not old and aside ~= '' then
  local topic = redis.pcall('HGET', KEYS[2], 'topic')
  if type(topic) == 'string' and topic ~= '' then
    local score = redis.pcall('ZSCORE', aside .. topic, ARGV[1])
    if type(score) == 'string' then old, held = score, aside .. topic end
  end
end
if not old or redis.call('EXISTS', KEYS[2]) == 0 then
  return false
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due_ms = now_ms + tonumber(ARGV[2])
local due = string.format('%d.%03d', math.floor(due_ms / 1000), due_ms % 1000)
local wake = ARGV[3] or ''
local head = wake ~= '' and redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if held then
  redis.call('ZREM', held, ARGV[1])
  redis.call('ZADD', KEYS[1], due, ARGV[1])
else
  redis.call('ZADD', KEYS[1], 'XX', due, ARGV[1])
end
redis.pcall('HSET', KEYS[2], 'due', due)
if head and (not head[2] or tonumber(due) < tonumber(head[2])) then
  local topic = redis.pcall('HGET', KEYS[2], 'topic')
  if type(topic) == 'string' then redis.pcall('PUBLISH', wake, due .. ' ' .. topic) end
end
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then
  local old_ms = math.floor(tonumber(old) * 1000 + 0.5)
  redis.call('PEXPIRE', KEYS[2], math.max(ttl + due_ms - math.max(old_ms, now_ms), tonumber(ARGV[2]) + 1000))
end
return due
