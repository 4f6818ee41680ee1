-- remove: cancel a job (delayer's REMOVE) in the classic layout.
--
-- KEYS[1]  job pool          ZSET  <prefix>job_pool
-- KEYS[2]  job bucket        HASH  <prefix>job_bucket:<id>
-- KEYS[3]  scheduled counts  HASH  <prefix>scheduled_count (topic -> jobs
--          waiting): -1 on the job's topic when it was waiting
-- ARGV[1]  job id
-- ARGV[2]  flow-pool prefix "<prefix>flow_pool:", or "" (or absent): none.
--          A job set aside there (its topic paused or rate limited) leaves
--          it (ZSET "<ARGV[2]><bucket's topic>") and counts -1 as from the
--          pool; a flow pool of the wrong type is ignored (the bucket's DEL
--          cancels the job anyway)
--
-- Returns 1 when there was something to cancel, 0 when the job was unknown
-- (never pushed, already popped, or expired).
--
-- A job still waiting leaves the pool. A job already moved to its ready queue
-- but not yet popped loses its bucket, so pop skips it: it is cancelled too.
local topic = redis.pcall('HGET', KEYS[2], 'topic')
local in_pool = redis.call('ZREM', KEYS[1], ARGV[1])
local held = 0
local aside = ARGV[2] or ''
if in_pool == 0 and aside ~= '' and type(topic) == 'string' and topic ~= '' then
  local n = redis.pcall('ZREM', aside .. topic, ARGV[1])
  if n == 1 then held = 1 end
end
local bucket = redis.call('DEL', KEYS[2])
-- The count under pcall: the job is cancelled whatever happens to it (a
-- count hash of the wrong type is reported by the server and stats).
if in_pool + held == 1 and type(topic) == 'string' and topic ~= '' then
  local left = redis.pcall('HINCRBY', KEYS[3], topic, -1)
  if type(left) == 'number' and left <= 0 then redis.call('HDEL', KEYS[3], topic) end
end
if in_pool + held + bucket > 0 then
  return 1
end
return 0
