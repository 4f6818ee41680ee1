-- pop: hand out the next ready job of one topic, at most once (delayer's POP).
--
-- KEYS[1]  ready queue     LIST  <prefix>ready_queue:<topic>
-- KEYS[2]  malformed list  LIST  <prefix>malformed
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
--
-- Returns {id, topic, body}, or nil when the queue holds no live job.
--
-- The id leaves the queue and its bucket is deleted in one step, so no other
-- consumer can get it. Ids whose bucket is gone (expired, or removed after the
-- move) are dropped and skipped: a consumer never sees an empty job. An id
-- whose bucket has no topic, or is not a hash, is parked on the malformed
-- list (bucket kept), as move.lua does: reported, not lost.
while true do
  local id = redis.call('RPOP', KEYS[1])
  if not id then
    return false
  end
  local bucket = ARGV[1] .. id
  local job = redis.pcall('HMGET', bucket, 'topic', 'body')
  if job.err or job[1] == '' or (not job[1] and job[2]) then
    redis.call('LPUSH', KEYS[2], id)
  elseif job[1] then
    redis.call('DEL', bucket)
    return {id, job[1], job[2] or ''}
  end
end
