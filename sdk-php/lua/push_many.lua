-- push_many: schedule up to 100 jobs in one call (delayer's bulk PUSH).
--
-- KEYS[1]  job pool  ZSET  <prefix>job_pool
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[2..] nine values per job: id, topic, body, delay ms, ready_max_lifetime
--           ms, max_attempts, backoff, backoff_ms, backoff_max_ms (the last
--           four "" when not set; see push.lua)
--
-- Returns the due time of each job, in order, as push.lua does.
--
-- Each job is written exactly as push.lua writes it; doing up to 100 in one
-- call saves Redis the per-call cost that dominates small pushes, and makes
-- each call's jobs atomic together. Bucket keys are built here from ARGV[1]
-- because the ids are data (see PROTOCOL.md on Redis Cluster).
if redis.replicate_commands then pcall(redis.replicate_commands) end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = {}
for i = 2, #ARGV, 9 do
  local id, delay_ms = ARGV[i], tonumber(ARGV[i + 3])
  local due_ms = now_ms + delay_ms
  local score = string.format('%d.%03d', math.floor(due_ms / 1000), due_ms % 1000)
  local bucket = ARGV[1] .. id
  -- ZADD first, as in push.lua: the call that can fail writes nothing after it.
  redis.call('ZADD', KEYS[1], score, id)
  redis.call('DEL', bucket)
  redis.call('HSET', bucket, 'topic', ARGV[i + 1], 'body', ARGV[i + 2])
  if ARGV[i + 5] ~= '' then
    redis.call('HSET', bucket, 'max_attempts', ARGV[i + 5])
  end
  if ARGV[i + 6] ~= '' then
    redis.call('HSET', bucket, 'backoff', ARGV[i + 6], 'backoff_ms', ARGV[i + 7], 'backoff_max_ms', ARGV[i + 8])
  end
  redis.call('PEXPIRE', bucket, delay_ms + tonumber(ARGV[i + 4]))
  due[#due + 1] = score
end
return due
