-- push_many: schedule up to 100 jobs in one call (delayer's bulk PUSH) in
-- the classic layout.
--
-- KEYS[1]  job pool          ZSET  <prefix>job_pool
-- KEYS[2]  scheduled counts  HASH  <prefix>scheduled_count (as push.lua's KEYS[3])
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[2]  duplicate policy, "replace" or "absent" (see push.lua)
-- ARGV[3]  wake channel "<prefix>wake" (both layouts), or "": none (see push.lua)
-- ARGV[4..] ten values per job: id, topic, body, delay ms, ready_max_lifetime
--           ms, max_attempts, backoff, backoff_ms, backoff_max_ms,
--           traceparent (the last five "" when not set; see push.lua)
--
-- The scheduled counts are written as push.lua writes them, with one
-- HINCRBY per topic per call.
--
-- Returns one entry per job, in order: its due time, as push.lua returns it,
-- or with policy "absent" and the id taken, {topic, due} of the job holding
-- it (that job is not written; the others are).
--
-- Each job is written exactly as push.lua writes it; doing up to 100 in one
-- call saves Redis the per-call cost that dominates small pushes, and makes
-- each call's jobs atomic together. Bucket keys are built here from ARGV[1]
-- because the ids are data (see PROTOCOL.md on Redis Cluster). One wake-up
-- message at most per call: "<due> <topic>" of the earliest due time (the
-- first job's topic among those due then), if it comes before the pool's
-- earliest.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local policy, wake = ARGV[2], ARGV[3]
if policy ~= '' and policy ~= 'replace' and policy ~= 'absent' then
  return redis.error_reply('ERR push_many.lua: unknown duplicate policy "' .. policy .. '"')
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = wake ~= '' and redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local earliest_ms, earliest_topic
local due = {}
local last_ms, last_score
-- per-topic changes of the scheduled counts, applied once per topic
local delta, topics = {}, {}
local function count(topic, n)
  if not delta[topic] then
    delta[topic] = 0
    topics[#topics + 1] = topic
  end
  delta[topic] = delta[topic] + n
end
for i = 4, #ARGV, 10 do
  local id, delay_ms = ARGV[i], tonumber(ARGV[i + 3])
  local bucket = ARGV[1] .. id
  if policy == 'absent' and redis.call('EXISTS', bucket) == 1 then
    local topic = redis.pcall('HGET', bucket, 'topic')
    due[#due + 1] = {type(topic) == 'string' and topic or '', redis.call('ZSCORE', KEYS[1], id) or ''}
  else
    local due_ms = now_ms + delay_ms
    -- A bulk push's jobs mostly share one delay: format each due time once.
    if due_ms ~= last_ms then
      last_ms, last_score = due_ms, string.format('%d.%03d', math.floor(due_ms / 1000), due_ms % 1000)
    end
    local score = last_score
    -- ZADD first, as in push.lua: the call that can fail writes nothing
    -- after it. (Only the first can: the pool's type and Redis's memory
    -- do not change within a call.)
    local added = redis.pcall('ZADD', KEYS[1], score, id)
    if type(added) == 'table' then
      if string.sub(added.err, 1, 9) ~= 'WRONGTYPE' then return added end
      return redis.error_reply('WRONGTYPE ' .. shown(KEYS[1]) .. ' is a ' .. redis.call('TYPE', KEYS[1]).ok .. ', not a zset')
    end
    if added == 0 then
      local old_topic = redis.pcall('HGET', bucket, 'topic')
      if type(old_topic) == 'string' and old_topic ~= '' then count(old_topic, -1) end
    end
    count(ARGV[i + 1], 1)
    redis.call('DEL', bucket)
    redis.call('HSET', bucket, 'topic', ARGV[i + 1], 'body', ARGV[i + 2])
    if ARGV[i + 5] ~= '' then
      redis.call('HSET', bucket, 'max_attempts', ARGV[i + 5])
    end
    if ARGV[i + 6] ~= '' then
      redis.call('HSET', bucket, 'backoff', ARGV[i + 6], 'backoff_ms', ARGV[i + 7], 'backoff_max_ms', ARGV[i + 8])
    end
    if ARGV[i + 9] ~= '' then
      redis.call('HSET', bucket, 'traceparent', ARGV[i + 9])
    end
    redis.call('PEXPIRE', bucket, delay_ms + tonumber(ARGV[i + 4]))
    due[#due + 1] = score
    if not earliest_ms or due_ms < earliest_ms then earliest_ms, earliest_topic = due_ms, ARGV[i + 1] end
  end
end
-- under pcall, as in push.lua: the jobs are written whatever happens to the counts
for _, topic in ipairs(topics) do
  local left = delta[topic] ~= 0 and redis.pcall('HINCRBY', KEYS[2], topic, delta[topic])
  if type(left) == 'number' and left <= 0 then redis.call('HDEL', KEYS[2], topic) end
end
if head and earliest_ms and (not head[2] or earliest_ms < math.floor(tonumber(head[2]) * 1000 + 0.5)) then
  local at = string.format('%d.%03d', math.floor(earliest_ms / 1000), earliest_ms % 1000)
  redis.pcall('PUBLISH', wake, at .. ' ' .. earliest_topic)
end
return due
