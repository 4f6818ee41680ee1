-- remove_topic: cancel a job (delayer's REMOVE) in the per-topic layout.
--
-- KEYS[1]  job pool          ZSET  <prefix>job_pool
-- KEYS[2]  job bucket        HASH  <prefix>job_bucket:<id>
-- ARGV[1]  job id
--
-- Returns 1 when there was something to cancel, 0 when the job was unknown
-- (never pushed, already popped, or expired).
--
-- A job still waiting leaves the pool. A job already moved to its ready queue
-- but not yet popped loses its bucket, so pop skips it: it is cancelled too.
local in_pool = redis.call('ZREM', KEYS[1], ARGV[1])
local bucket = redis.call('DEL', KEYS[2])
if in_pool + bucket > 0 then
  return 1
end
return 0
