-- move: move one batch of due jobs from the pool to their topics' ready
-- queues (the server's only write; atomic, so any number of servers can run).
--
-- KEYS[1]  job pool          ZSET  <prefix>job_pool
-- KEYS[2]  malformed list    LIST  <prefix>malformed
-- KEYS[3]  scheduled counts  HASH  <prefix>scheduled_count
-- KEYS[4]  known topics      SET   <prefix>topics
-- KEYS[5]  reserved          ZSET  <prefix>reserved
-- KEYS[6]  flow topics       SET   <prefix>flow_topics (topics whose due
--          ids are set aside, see below)
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:" (a bucket is it + id)
-- ARGV[2]  ready queue prefix, "<prefix>ready_queue:" (a queue is it + topic)
-- ARGV[3]  batch size: the most ids taken from the pool in this call
-- ARGV[4]  "1" to return each moved id's lateness (for metrics), else "0"
--          (building the list costs Redis time on every batch)
-- ARGV[5]  held head: how many due ids at the pool's head the caller knows
--          to be held (see below); the call looks at the ids after them
--          ("" reads as 0)
-- ARGV[6]  flow pool prefix, "<prefix>flow_pool:" (a topic's is it + topic)
--
-- Returns {taken, orphans, malformed_ids, per_topic, next_due, now, oldest_due,
--          pool_size, lateness_ms, held, bad_keys, head, aside}
--   taken          ids taken off the pool (moved + set aside + orphans +
--                  malformed);
--                  taken + held == batch size means more may be due: call again
--   orphans        ids whose bucket was gone (expired or removed): dropped
--   malformed_ids  ids whose bucket has no topic (or is not a hash): parked
--                  on KEYS[2], bucket kept for inspection
--   per_topic      flat {topic1, count1, topic2, count2, ...}
--   next_due       score of the earliest job left in the pool after the held
--                  head, "" if none
--   now            Redis's clock, Unix seconds "s.uuuuuu" (microseconds:
--                  the server times its next wake-up from it)
--   oldest_due     score of the first id taken, "" if none
--   pool_size      ids left in the pool (held ones included)
--   lateness_ms    with ARGV[4] = "1": for each id moved, ms behind its due
--                  time (the server's lateness histogram); else empty
--   held           ids looked at and left in the pool, because the key they
--                  go to (their ready queue, or KEYS[2]) holds the wrong type
--   bad_keys       flat {key1, type1, expected1, ...}: each key of the wrong
--                  type met (expected "integers" for a count hash with a
--                  field that is not one); its work was skipped
--   head           the held head after this call (ARGV[5] + held), or 0 when
--                  the id just before ARGV[5] is not a held one: the head
--                  changed under the caller, which then calls again from 0
--   aside          flat {topic1, count1, ...}: ids set aside per topic
--
-- Flow control (PROTOCOL.md, "Flow control"): the due ids of a topic listed
-- in KEYS[6] (paused, or with ids still set aside) go to its flow pool, a ZSET
-- scored by due time, instead of its ready queue; move_flow.lua makes them
-- ready once the topic runs. So a paused topic's backlog leaves the shared
-- pool once and never holds up another topic's moves. Set-aside ids keep
-- their scheduled count and record no lateness (move_flow.lua does both);
-- a flow pool of the wrong type holds its topic's ids as a ready queue of
-- the wrong type does. An empty KEYS[6] costs one SCARD per call; a
-- non-empty one a SISMEMBER per topic in the batch. ZADDs are sent in
-- chunks of 2,000 ids (Lua's unpack takes about 8,000 values).
--
-- Ids are read with ZRANGEBYSCORE -inf now LIMIT 0 n, which are exactly ranks
-- 0..n-1, so one ZREMRANGEBYRANK removes them (with a held head, ranks
-- ARGV[5].. are read and removed the same way; ZREM instead when the batch
-- holds held ids). Ready queues get ids by LPUSH in due order; consumers
-- RPOP, so the first due is the first out.
--
-- Guards (PROTOCOL.md, "Operations"): a call never stops half done. Each
-- LPUSH runs under pcall: a key of the wrong type refuses it whole, writing
-- nothing, and only the ids that go to that key are held; the rest of the
-- batch moves. Held ids stay in the pool, untouched, at its head (they are
-- the earliest due): the caller passes their count back as ARGV[5] and
-- later calls look past them, so they hold up nobody; once the key is
-- fixed (its type right, or deleted) a call from 0 moves them, exactly
-- once. Redis refuses a write for maxmemory only as a script's first (and
-- then nothing is written): when the first LPUSH meets OOM, the call checks
-- each destination's type (TYPE) instead, removes the batch from the pool
-- first, which adds no memory, and pushes after it, which Redis then
-- allows: moving goes on in a full Redis.
-- Bookkeeping (the counts, the known topics, the stale reservations) is
-- skipped for a key of the wrong type, and reported: it never stops a move.
--
-- A moved id that is also in the reserved set was pushed again by a 1.x-style
-- write while reserved (that write keeps the old receipt field): its old
-- reservation is stale and is ended here, so the old worker's ack cannot
-- delete the newer job. Skipped while nothing is reserved, the common case.
-- Per-topic numbers (PROTOCOL.md, "Inspecting jobs"), a few calls per batch,
-- none per job: KEYS[3] loses each topic's moved ids
-- (HINCRBY -n, never below 0), KEYS[4] gets the batch's topics (every
-- topic with jobs moved or held, Delayer 1.x pushers included), and the
-- count hash is deleted when the pool is left empty, which resets any drift
-- (jobs of 1.x clients, orphans) to exact.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local pool, malformed, counts, known, reserved, flow_set = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local flow_pools = ARGV[6] or ''
local buckets, queues, batch = ARGV[1], ARGV[2], tonumber(ARGV[3])
local from = math.max(0, math.floor(tonumber(ARGV[5] or '') or 0))
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
local now_s = tonumber(now)

-- Keys of the wrong type met (the reply's bad_keys), and what TYPE said of
-- each key checked, so that each costs one TYPE per call.
local bad_keys, types = {}, {}
local function bad(key, kind, expected)
  bad_keys[#bad_keys + 1] = key
  bad_keys[#bad_keys + 1] = kind
  bad_keys[#bad_keys + 1] = expected
end
local function type_of(key, expected)
  local kind = types[key]
  if not kind then
    kind = redis.call('TYPE', key).ok
    types[key] = kind
    if kind ~= 'none' and kind ~= expected then bad(key, kind, expected) end
  end
  return kind
end
-- Whether `key` can take an LPUSH (or a ZADD: `expected` "zset").
local function fits(key, expected)
  local kind = type_of(key, expected or 'list')
  return kind == expected or kind == 'none' or (not expected and kind == 'list')
end

-- Which topics are set aside: members of KEYS[6], asked once per topic.
local controlled, flow_members = {}, false
if flow_set and flow_pools ~= '' then
  local n = redis.pcall('SCARD', flow_set)
  if type(n) == 'number' then
    flow_members = n > 0
  else
    bad(flow_set, redis.call('TYPE', flow_set).ok, 'set')
  end
end
local function aside(topic)
  if not flow_members or topic == '' then return false end
  local yes = controlled[topic]
  if yes == nil then
    yes = redis.call('SISMEMBER', flow_set, topic) == 1
    controlled[topic] = yes
  end
  return yes
end

-- With a held head, ranks from-1.. are read: the first one must be a held
-- id, else the head changed (a held job removed or pushed again) and the
-- caller starts again from 0. Ranks, not scores: an offset into a score
-- range costs Redis a walk over the skipped ids.
local due
if from == 0 then
  due = redis.pcall('ZRANGEBYSCORE', pool, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch)
else
  due = redis.pcall('ZRANGE', pool, from - 1, from + batch - 1, 'WITHSCORES')
end
if due.err then
  return redis.error_reply('WRONGTYPE ' .. shown(pool) .. ' is a ' .. redis.call('TYPE', pool).ok .. ', not a zset')
end

-- Whether the ids of each topic can go to its queue ("" for malformed
-- ids: the malformed list), read once per topic and call: per id, a table
-- lookup, so the per-job cost stays what it was.
local open = {}
local function opens(topic)
  local ok = open[topic]
  if ok == nil then
    if topic == '' then
      ok = fits(malformed)
    elseif aside(topic) then
      ok = fits(flow_pools .. topic, 'zset')
    else
      ok = fits(queues .. topic)
    end
    open[topic] = ok
  end
  return ok
end

local first, head_ok = 1, true
if from > 0 then
  -- The id before the ones to look at must be a held one (due, with a
  -- destination of the wrong type).
  first = 3
  local topic = #due >= 2 and tonumber(due[2]) <= now_s and redis.pcall('HGET', buckets .. due[1], 'topic')
  if type(topic) ~= 'string' then
    topic = (topic or redis.call('EXISTS', buckets .. due[1]) == 1) and '' or nil
  end
  head_ok = topic ~= nil and not opens(topic)
end

local held, held_ids, held_topics = 0, {}, {}
local orphans, malformed_ids = 0, {}
local by_topic, topics, late, scores = {}, {}, {}, {}
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want_lateness = ARGV[4] == '1'
local last = #due - 1 -- index of the last id looked at

for i = first, #due, 2 do
  local id = due[i]
  if from > 0 and tonumber(due[i + 1]) > now_s then
    last = i - 2
    break
  end
  local bucket = buckets .. id
  -- pcall: a bucket of the wrong type is a malformed id, not a failed batch
  local topic = redis.pcall('HGET', bucket, 'topic')
  if type(topic) == 'string' and topic ~= '' then
    local ids = by_topic[topic]
    if not ids then
      ids = {}
      by_topic[topic] = ids
      topics[#topics + 1] = topic
      late[topic] = {}
      if aside(topic) then scores[topic] = {} end
    end
    ids[#ids + 1] = id
    local sc = scores[topic]
    if sc then
      sc[#sc + 1] = due[i + 1]
    elseif want_lateness then
      -- at most 10 years: a score of -inf is no lateness to record
      local ms = now_ms - math.floor(tonumber(due[i + 1]) * 1000 + 0.5)
      local l = late[topic]
      l[#l + 1] = math.min(math.max(0, ms), 315360000000)
    end
  elseif not topic and redis.call('EXISTS', bucket) == 0 then
    orphans = orphans + 1
  else
    malformed_ids[#malformed_ids + 1] = id
  end
end

local function hold(ids, topic)
  for _, id in ipairs(ids) do held_ids[id] = true end
  held = held + #ids
  if topic then held_topics[topic] = true end
end

-- The writes. Fast order: each LPUSH under pcall (a key of the wrong type
-- refuses it whole and writes nothing: those ids are held), then the pool's
-- removal of the rest. Redis refuses a write for maxmemory only as a
-- script's first: when the first LPUSH meets OOM, nothing is written, and
-- the call takes the other order (see the header): each destination's type
-- checked, the pool's removal first, then the LPUSHes.
local wrote, oom, pushed, added = false, false, {}, {}
-- A topic's set-aside ids into its flow pool, 2,000 per ZADD: the number
-- added (ids already there are not), or the first chunk's error (a later
-- chunk cannot fail: same key, and Redis checks memory at the first write).
local function zadd(call, key, ids, sc)
  local n = 0
  for from_i = 1, #ids, 2000 do
    local args = {}
    for j = from_i, math.min(from_i + 1999, #ids) do
      args[#args + 1] = sc[j]
      args[#args + 1] = ids[j]
    end
    local r = call('ZADD', key, unpack(args))
    if type(r) ~= 'number' then return r end
    n = n + r
  end
  return n
end
local function push(key, ids, topic)
  local r
  if topic and scores[topic] then
    key = flow_pools .. topic
    r = zadd(redis.pcall, key, ids, scores[topic])
    if type(r) == 'number' then added[topic] = r end
  else
    r = redis.pcall('LPUSH', key, unpack(ids))
  end
  if type(r) == 'number' then
    wrote = true
    if topic then pushed[topic] = true end
  elseif not wrote and string.sub(r.err, 1, 3) == 'OOM' then
    oom = true
  elseif not wrote and string.sub(r.err, 1, 9) ~= 'WRONGTYPE' then
    return r -- refused before anything was written (a replica, a disk error)
  else
    type_of(key, topic and scores[topic] and 'zset' or 'list')
    hold(ids, topic)
  end
end
for _, topic in ipairs(topics) do
  local err = push(queues .. topic, by_topic[topic], topic)
  if err then return err end
  if oom then break end
end
if not oom and #malformed_ids > 0 then
  local err = push(malformed, malformed_ids, nil)
  if err then return err end
  if held_ids[malformed_ids[1]] then malformed_ids = {} end
end
if oom then
  for _, topic in ipairs(topics) do
    if not opens(topic) then hold(by_topic[topic], topic) end
  end
  if #malformed_ids > 0 and not opens('') then
    hold(malformed_ids, nil)
    malformed_ids = {}
  end
end

-- The ids taken off the pool: every one looked at but the held ones.
local taken = (last - first) / 2 + 1 - held
local oldest, taken_ids = '', {}
for i = first, last, 2 do
  if not held_ids[due[i]] then
    if oldest == '' then oldest = due[i + 1] end
    if held == 0 then break end
    taken_ids[#taken_ids + 1] = due[i]
  end
end
if taken > 0 then
  if held == 0 then
    redis.call('ZREMRANGEBYRANK', pool, from, from + taken - 1)
  else
    redis.call('ZREM', pool, unpack(taken_ids))
  end
end
if oom then
  for _, topic in ipairs(topics) do
    if not held_topics[topic] then
      if scores[topic] then
        added[topic] = zadd(redis.call, flow_pools .. topic, by_topic[topic], scores[topic])
      else
        redis.call('LPUSH', queues .. topic, unpack(by_topic[topic]))
      end
      pushed[topic] = true
    end
  end
  if #malformed_ids > 0 then redis.call('LPUSH', malformed, unpack(malformed_ids)) end
end

-- What moved (and what was set aside), per topic; the held topics are left out.
local moved, per_topic, lateness, set_aside = {}, {}, {}, {}
for _, topic in ipairs(topics) do
  if pushed[topic] then
    moved[#moved + 1] = topic
    local list = scores[topic] and set_aside or per_topic
    list[#list + 1] = topic
    list[#list + 1] = #by_topic[topic]
    for _, ms in ipairs(late[topic]) do lateness[#lateness + 1] = ms end
  end
end
topics = moved

-- Bookkeeping: a key of the wrong type skips it, reported.
local function skipped(key, result, expected)
  -- OOM: a count left out while Redis is out of memory (it refuses a first write)
  if string.sub(result.err, 1, 3) ~= 'OOM' then
    local kind = redis.call('TYPE', key).ok
    bad(key, kind, kind == expected and 'integers' or expected)
  end
end
if #topics > 0 and reserved then
  local kind = redis.call('TYPE', reserved).ok
  if kind == 'zset' then
    for _, topic in ipairs(topics) do
      redis.call('ZREM', reserved, unpack(by_topic[topic]))
    end
  elseif kind ~= 'none' then
    bad(reserved, kind, 'zset')
  end
end
for _, topic in ipairs(topics) do
  -- A set-aside id stays counted until move_flow.lua makes it ready, unless
  -- it was in the flow pool already (pushed again meanwhile): counted twice.
  local gone = #by_topic[topic]
  if scores[topic] then gone = gone - (added[topic] or gone) end
  local left = gone > 0 and redis.pcall('HINCRBY', counts, topic, -gone) or 1
  if type(left) == 'table' then
    skipped(counts, left, 'hash')
    if string.sub(left.err, 1, 9) == 'WRONGTYPE' then break end
  elseif left <= 0 then
    redis.call('HDEL', counts, topic)
  end
end
for topic in pairs(held_topics) do
  if not pushed[topic] then topics[#topics + 1] = topic end
end
if #topics > 0 then
  local added = redis.pcall('SADD', known, unpack(topics))
  if type(added) == 'table' then skipped(known, added, 'set') end
end

local head = head_ok and from + held or 0
local next_due = redis.call('ZRANGE', pool, head, head, 'WITHSCORES')
local left = redis.call('ZCARD', pool)
-- Set-aside ids are counted too: the reset waits for the flow pools to empty.
if left == 0 and redis.call('TYPE', counts).ok == 'hash'
    and (not flow_set or redis.pcall('SCARD', flow_set) == 0) then
  redis.call('DEL', counts)
end
return {taken, orphans, malformed_ids, per_topic, next_due[2] or '', t[1] .. '.' .. string.format('%06d', tonumber(t[2])),
        oldest, left, lateness, held, bad_keys, head, set_aside}
