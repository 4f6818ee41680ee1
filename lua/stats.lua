-- stats: per-topic numbers (scheduled, ready, reserved, dead) for operators,
-- dashboards and Prometheus gauges. Read-only, and cheap on any backlog:
-- O(topics + min(reserved, ARGV[4])), never a scan of the pool.
--
-- KEYS[1]  topics           SET   <prefix>topics
-- KEYS[2]  scheduled counts HASH  <prefix>scheduled_count
-- KEYS[3]  job pool         ZSET  <prefix>job_pool
-- KEYS[4]  reserved         ZSET  <prefix>reserved
-- KEYS[5]  flow topics      SET   <prefix>flow_topics
-- ARGV[1]  ready queue prefix "<prefix>ready_queue:"
-- ARGV[2]  dead-letter prefix "<prefix>dead:"
-- ARGV[3]  bucket key prefix  "<prefix>job_bucket:"
-- ARGV[4]  the most reserved ids whose topic is read: per-topic reserved
--          counts are given only when the reserved set is no larger
-- ARGV[5]  flow hash prefix   "<prefix>flow:"
-- ARGV[6]  flow pool prefix   "<prefix>flow_pool:"
--
-- Returns {pool_total, reserved_total, reserved_by_topic_known (1|0),
--          {topic, scheduled, ready, reserved, dead, paused_since, held,
--           per_second, burst}, ...}
--          sorted by topic;
--   scheduled  <prefix>scheduled_count's field (exact for Delayer 2
--              writers; jobs pushed by 1.x clients are not counted until the
--              pool has been empty once: pool_total counts them all)
--   ready      LLEN of the topic's ready queue (stale entries included)
--   reserved   ids in the reserved set of that topic (0 when not known)
--   dead       LLEN of the topic's dead-letter list
--   paused_since  the flow hash's `paused` ("s.mmm") while the topic is
--              paused, "" while it runs ("?" for a flow hash of the wrong
--              type, or an empty `paused`: nothing of the topic is handed
--              out then either)
--   held       due jobs set aside in the topic's flow pool (counted in
--              scheduled too): held by a pause or a rate limit
--   per_second the topic's rate limit (jobs per second, as flow.lua stored
--              it), "" when it has none
--   burst      the limit's burst, "" when none
-- Topics are those of <prefix>topics (every topic a Delayer 2 server moved
-- jobs of), of the count hash (topics with jobs pushed by Delayer 2 and
-- waiting), of the reserved ids and of <prefix>flow_topics (paused ones).
-- A key of the wrong type reads as empty (`delayer stats` names it): the
-- numbers of every other key are still given.
local function read(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then return nil end
  return r
end
local pool_total = read('ZCARD', KEYS[3]) or 0
local reserved_total = read('ZCARD', KEYS[4]) or 0
local cap = tonumber(ARGV[4])
local seen, names = {}, {}
local function topic_of(name)
  if not seen[name] then
    seen[name] = {0, 0}
    names[#names + 1] = name
  end
  return seen[name]
end
for _, name in ipairs(read('SMEMBERS', KEYS[1]) or {}) do topic_of(name) end
for _, name in ipairs(read('SMEMBERS', KEYS[5]) or {}) do topic_of(name) end
local counts = read('HGETALL', KEYS[2]) or {}
for i = 1, #counts, 2 do
  local n = tonumber(counts[i + 1]) or 0
  -- a count is an integer of a sane size; anything else reads as 0
  if n ~= n or math.abs(n) >= 2 ^ 53 then n = 0 end
  topic_of(counts[i])[1] = math.floor(n)
end
local known = 0
if reserved_total <= cap then
  known = 1
  for _, id in ipairs(read('ZRANGE', KEYS[4], 0, -1) or {}) do
    local name = redis.pcall('HGET', ARGV[3] .. id, 'topic')
    if type(name) == 'string' and name ~= '' then
      local t = topic_of(name)
      t[2] = t[2] + 1
    end
  end
end
table.sort(names)
local out = {pool_total, reserved_total, known}
for _, name in ipairs(names) do
  local t = seen[name]
  local ready = redis.pcall('LLEN', ARGV[1] .. name)
  local dead = redis.pcall('LLEN', ARGV[2] .. name)
  local flow = redis.pcall('HMGET', ARGV[5] .. name, 'paused', 'per_second', 'burst')
  local paused, rate, burst = '?', '', ''
  if not flow.err then
    paused, rate, burst = flow[1] or '', flow[2] or '', flow[3] or ''
    if flow[1] == '' then paused = '?' end
  end
  local held = read('ZCARD', ARGV[6] .. name) or 0
  out[#out + 1] = {name, math.max(t[1], 0), type(ready) == 'number' and ready or 0, t[2],
                   type(dead) == 'number' and dead or 0, paused, held, rate, burst}
end
return out
