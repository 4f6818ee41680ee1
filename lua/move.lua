-- move: move one batch of due jobs from the pool to their topics' ready
-- queues (the server's only write; atomic, so any number of servers can run).
--
-- KEYS[1]  job pool          ZSET  <prefix>job_pool
-- KEYS[2]  malformed list    LIST  <prefix>malformed
-- KEYS[3]  scheduled counts  HASH  <prefix>scheduled_count
-- KEYS[4]  known topics      SET   <prefix>topics
-- KEYS[5]  reserved          ZSET  <prefix>reserved (optional)
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:" (a bucket is it + id)
-- ARGV[2]  ready queue prefix, "<prefix>ready_queue:" (a queue is it + topic)
-- ARGV[3]  batch size: the most ids taken from the pool in this call
-- ARGV[4]  "1" to return each moved id's lateness (for metrics); optional,
--          since building the list costs Redis time on every batch
--
-- Returns {taken, orphans, malformed_ids, per_topic, next_due, now, oldest_due,
--          pool_size, lateness_ms}
--   taken          ids taken off the pool (moved + orphans + malformed);
--                  taken == batch size means more may be due: call again
--   orphans        ids whose bucket was gone (expired or removed): dropped
--   malformed_ids  ids whose bucket has no topic (or is not a hash): parked
--                  on KEYS[2], bucket kept for inspection
--   per_topic      flat {topic1, count1, topic2, count2, ...}
--   next_due       score of the earliest job left in the pool, "" if none
--   now            Redis's clock, Unix seconds "s.uuuuuu" (microseconds:
--                  the server times its next wake-up from it)
--   oldest_due     score of the first id taken, "" if none
--   pool_size      ids left in the pool
--   lateness_ms    with ARGV[4] = "1": for each id moved, ms behind its due
--                  time (the server's lateness histogram); else empty
--
-- Ids are read with ZRANGEBYSCORE -inf now LIMIT 0 n, which are exactly ranks
-- 0..n-1, so one ZREMRANGEBYRANK removes them. Ready queues get ids by LPUSH
-- in due order; consumers RPOP, so the first due is the first out.
-- A moved id that is also in the reserved set was pushed again by a 1.x-style
-- write while reserved (that write keeps the old receipt field): its old
-- reservation is stale and is ended here, so the old worker's ack cannot
-- delete the newer job. Skipped while nothing is reserved, the common case.
-- Per-topic numbers (PROTOCOL.md, "Inspecting jobs"), a few calls per batch,
-- none per job: KEYS[3] loses each topic's moved ids
-- (HINCRBY -n, never below 0), KEYS[4] gets the batch's topics (every
-- topic with jobs moved, Delayer 1.x pushers included), and the count hash
-- is deleted when the pool is left empty, which resets any drift (jobs of
-- 1.x clients, orphans) to exact.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local pool, malformed, counts = KEYS[1], KEYS[2], KEYS[3]
local buckets, queues, batch = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))

local due = redis.call('ZRANGEBYSCORE', pool, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch)
local taken = #due / 2
local orphans, malformed_ids = 0, {}
local by_topic, topics = {}, {}
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lateness, want_lateness = {}, ARGV[4] == '1'

for i = 1, #due, 2 do
  local id = due[i]
  -- pcall: a bucket key of the wrong type must park its id, not fail the batch
  local bucket = buckets .. id
  local topic = redis.pcall('HGET', bucket, 'topic')
  if not topic and redis.call('EXISTS', bucket) == 0 then
    orphans = orphans + 1
  elseif type(topic) ~= 'string' or topic == '' then
    malformed_ids[#malformed_ids + 1] = id
  else
    local ids = by_topic[topic]
    if not ids then
      ids = {}
      by_topic[topic] = ids
      topics[#topics + 1] = topic
    end
    ids[#ids + 1] = id
    if want_lateness then
      lateness[#lateness + 1] = math.max(0, now_ms - math.floor(tonumber(due[i + 1]) * 1000 + 0.5))
    end
  end
end

local per_topic = {}
local reserved = KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1 and KEYS[5]
for _, topic in ipairs(topics) do
  local ids = by_topic[topic]
  redis.call('LPUSH', queues .. topic, unpack(ids))
  if reserved then
    redis.call('ZREM', reserved, unpack(ids))
  end
  per_topic[#per_topic + 1] = topic
  per_topic[#per_topic + 1] = #ids
end
if #topics > 0 then
  for _, topic in ipairs(topics) do
    if redis.call('HINCRBY', counts, topic, -#by_topic[topic]) <= 0 then redis.call('HDEL', counts, topic) end
  end
  redis.call('SADD', KEYS[4], unpack(topics))
end
if #malformed_ids > 0 then
  redis.call('LPUSH', malformed, unpack(malformed_ids))
end
if taken > 0 then
  redis.call('ZREMRANGEBYRANK', pool, 0, taken - 1)
end

local next_due = redis.call('ZRANGE', pool, 0, 0, 'WITHSCORES')
local oldest = ''
if taken > 0 then oldest = due[2] end
local left = redis.call('ZCARD', pool)
if left == 0 then redis.call('DEL', counts) end
return {taken, orphans, malformed_ids, per_topic, next_due[2] or '', t[1] .. '.' .. string.format('%06d', tonumber(t[2])), oldest,
        left, lateness}
