-- pop: hand out the next ready job of one topic, at most once (delayer's POP).
--
-- KEYS[1]  ready queue     LIST  <prefix>ready_queue:<topic>
-- KEYS[2]  malformed list  LIST  <prefix>malformed
-- KEYS[3]  job pool        ZSET  <prefix>job_pool
-- KEYS[4]  reserved        ZSET  <prefix>reserved
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
--
-- Returns {id, topic, body}, or nil when the queue holds no live job.
--
-- The id leaves the queue and its bucket is deleted in one step, so no other
-- consumer can get it. Ids whose bucket is gone (expired, or removed after the
-- move) are dropped and skipped: a consumer never sees an empty job. An id
-- whose bucket has no topic, or is not a hash, is parked on the malformed
-- list (bucket kept), as move.lua does: reported, not lost.
-- A stale entry is dropped too: one left by an earlier push of an id that
-- has since been pushed again (the id waits in the pool), reserved, or died.
-- Handing it out would deliver the newer job before its due time.
while true do
  local id = redis.call('RPOP', KEYS[1])
  if not id then
    return false
  end
  local bucket = ARGV[1] .. id
  local job = redis.pcall('HMGET', bucket, 'topic', 'body', 'dead_reason')
  if job.err or job[1] == '' or (not job[1] and job[2]) then
    redis.call('LPUSH', KEYS[2], id)
  elseif job[1] then
    -- A key of the wrong type must not lose the id just popped: it goes
    -- back, and the error is returned.
    local waiting, held = redis.pcall('ZSCORE', KEYS[3], id), redis.pcall('ZSCORE', KEYS[4], id)
    if type(waiting) == 'table' or type(held) == 'table' then
      redis.call('RPUSH', KEYS[1], id)
      return type(waiting) == 'table' and waiting or held
    end
    if not (job[3] or waiting or held) then
      redis.call('DEL', bucket)
      return {id, job[1], job[2] or ''}
    end
  end
end
