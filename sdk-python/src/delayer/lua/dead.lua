-- dead: list, re-queue or purge a topic's dead-letter list (classic layout).
--
-- KEYS[1]  dead-letter list  LIST  <prefix>dead:<topic>
-- KEYS[2]  job pool          ZSET  <prefix>job_pool
-- KEYS[3]  scheduled counts  HASH  <prefix>scheduled_count (a re-queue adds
--          its jobs to the topic's field)
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[2]  topic (the one KEYS[1] belongs to)
-- ARGV[3]  "list":    ARGV[4] start, ARGV[5] count (newest first)
--            Returns {{id, topic, body, attempts, reason, dead_at,
--            last_error}, ...} (last_error "" when no attempt gave one)
--          "requeue": schedule jobs again, due now, with attempts reset (the
--            bucket's due field, read for the ready-queue age, says now);
--            "requeue <channel>" (added in 2.x: the action, a space and the
--            wake channel, <prefix>wake) also publishes "<now> <topic>" when
--            it re-queued a job due before the pool's earliest (or into an
--            empty pool). The channel rides on the action because ARGV[5..]
--            may hold any number of ids: a value after them would read as one.
--          "purge":   delete jobs for good
--            for both: ARGV[4] how many to take from the oldest end, or
--            ARGV[5..] the ids to take (then ARGV[4] is ignored)
--            Returns {done, taken}: jobs re-queued / purged, and entries
--            taken off the list (stale ones included); with a count, taken
--            below it means the list is empty.
--
-- An entry counts only while its bucket says it is dead (dead_reason) on
-- this list's topic: an id removed or pushed again since it died is stale,
-- skipped by "list" and dropped by the other two without touching its bucket.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local list, pool = KEYS[1], KEYS[2]
local buckets, topic, action = ARGV[1], ARGV[2], ARGV[3]
local wake = ''
if string.sub(action, 1, 8) == 'requeue ' then
  action, wake = 'requeue', string.sub(action, 9)
end

local function dead_job(id)
  local job = redis.pcall('HMGET', buckets .. id, 'topic', 'body', 'attempts', 'dead_reason', 'dead_at',
    'last_error')
  if job.err or not job[4] or job[1] ~= topic then
    return nil
  end
  return job
end

if action == 'list' then
  local out = {}
  for _, id in ipairs(redis.call('LRANGE', list, tonumber(ARGV[4]), tonumber(ARGV[4]) + tonumber(ARGV[5]) - 1)) do
    local job = dead_job(id)
    if job then
      out[#out + 1] = {id, job[1] or '', job[2] or '', tonumber(job[3]) or 0, job[4], job[5] or '', job[6] or ''}
    end
  end
  return out
end

-- Each job is re-queued or purged before its entry leaves the list (ZADD
-- is the call that can fail, and Redis does not roll back): a failure
-- leaves dead letters dead, never nowhere.
local ids, by_id = {}, #ARGV > 4
if by_id then
  for i = 5, #ARGV do
    if redis.call('LPOS', list, ARGV[i]) then
      ids[#ids + 1] = ARGV[i]
    end
  end
else
  -- the oldest entries are at the right end
  ids = redis.call('LRANGE', list, -tonumber(ARGV[4]), -1)
end

-- The pool is checked before the first write (an entry's LREM may come
-- before the first ZADD): a call either fails before writing or completes.
if action == 'requeue' then
  local kind = redis.call('TYPE', pool).ok
  if kind ~= 'zset' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. shown(pool) .. ' is a ' .. kind .. ', not a zset')
  end
end
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
local head = action == 'requeue' and wake ~= '' and redis.call('ZRANGE', pool, 0, 0, 'WITHSCORES')
local done = 0
for _, id in ipairs(ids) do
  if dead_job(id) then
    local bucket = buckets .. id
    if action == 'requeue' then
      redis.call('ZADD', pool, now, id)
      redis.call('HDEL', bucket, 'dead_reason', 'dead_at')
      redis.call('HSET', bucket, 'attempts', 0, 'due', now)
    else
      redis.call('DEL', bucket)
    end
    done = done + 1
  end
  if by_id then
    redis.call('LREM', list, 0, id)
  end
end
if action == 'requeue' and done > 0 then
  redis.pcall('HINCRBY', KEYS[3], topic, done) -- a count only: never fails the re-queue
end
if head and done > 0 and (not head[2] or tonumber(now) < tonumber(head[2])) then
  redis.pcall('PUBLISH', wake, now .. ' ' .. topic)
end
if not by_id and #ids > 0 then
  redis.call('LTRIM', list, 0, -#ids - 1)
end
return {done, #ids}
