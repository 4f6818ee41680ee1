-- move_flow: make one batch of a topic's set-aside ids ready (classic
-- layout), once the topic is no longer paused, as fast as its rate limit allows. move.lua sets a flow-
-- controlled topic's due ids aside in its flow pool; the server calls this
-- for each topic of KEYS[7] (engine/flow.rs).
--
-- KEYS[1]  flow pool         ZSET  <prefix>flow_pool:<topic> (score: due time)
-- KEYS[2]  ready queue       LIST  <prefix>ready_queue:<topic>
-- KEYS[3]  flow hash         HASH  <prefix>flow:<topic>
-- KEYS[4]  job pool          ZSET  <prefix>job_pool
-- KEYS[5]  reserved          ZSET  <prefix>reserved
-- KEYS[6]  scheduled counts  HASH  <prefix>scheduled_count
-- KEYS[7]  flow topics       SET   <prefix>flow_topics
-- ARGV[1]  topic
-- ARGV[2]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[3]  batch size: the most ids taken from the flow pool in this call
-- ARGV[4]  "1" to return each moved id's due time (for metrics), else "0"
--
-- Returns {moved, dropped, flow, left, now, resumed, last_paused, dues, bad_keys,
--          head, next_allowed, backlog}
--   moved        ids pushed on the ready queue, in due order
--   dropped      stale ids taken off the flow pool and not moved: the bucket
--                is gone or another topic's, or the id waits in the pool
--                again or is reserved (PROTOCOL.md's rules for stale entries)
--   flow         "paused": the topic is paused, nothing was looked at;
--                "limited": its rate limit left due ids in the flow pool;
--                else ""
--   left         ids left in the flow pool
--   now          Redis's clock, "s.uuuuuu"
--   resumed, last_paused   the flow hash's fields ("" when absent): the
--                server splits a moved job's wait into held and late
--   dues         with ARGV[4] = "1", each moved id's due time (score); else {}
--   bad_keys     flat {key, type, expected, ...}: keys of the wrong type met;
--                a flow hash, flow pool or ready queue of the wrong type
--                moves nothing (the ids wait, none is lost)
--   head         the due time (score) of the first id left in the flow pool,
--                "" if none: one that is no time Redis's clock reaches waits
--                there, and the server names the key
--   next_allowed "limited": when the next id's token is there (Unix seconds
--                "s.mmm"); else ""
--   backlog      the flow hash's "backlog" when the call began ("s.mmm":
--                since when due ids have been waiting for tokens), else ""
--
-- Writes: the taken ids leave the flow pool first (a removal: Redis then
-- does not refuse the LPUSH after it for maxmemory), then the LPUSH, then the
-- scheduled count (-taken). A flow pool left empty of a topic that is not
-- paused or rate-limited leaves KEYS[7]: move.lua sends its ids to the ready
-- queue again. The rate limit is move_topic.lua's token bucket
-- (lua/includes/bucket.lua): one token per id made ready (a dropped stale id
-- takes none).
-- Ids due after `now` (a clock that went back) stay: nothing is early.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local fpool, ready, flow, pool, reserved, counts, flow_set = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local topic, buckets, batch = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))

local bad_keys = {}
local function bad(key, expected)
  bad_keys[#bad_keys + 1] = key
  bad_keys[#bad_keys + 1] = redis.call('TYPE', key).ok
  bad_keys[#bad_keys + 1] = expected
end
local backlog = ''
local function reply(moved, dropped, state, resumed, last_paused, dues)
  local left = redis.pcall('ZCARD', fpool)
  local head = type(left) == 'number' and left > 0 and redis.call('ZRANGE', fpool, 0, 0, 'WITHSCORES')[2] or ''
  if type(left) ~= 'number' then left = 0 end
  return {moved, dropped, state, left, now, resumed or '', last_paused or '', dues, bad_keys, head, '', backlog or ''}
end

local f = redis.pcall('HMGET', flow, 'paused', 'resumed', 'last_paused', 'per_second', 'burst', 'tokens', 'tokens_at',
  'backlog')
if f.err then
  bad(flow, 'hash')
  return reply(0, 0, '', nil, nil, {})
end
backlog = f[8] or ''
if f[1] then
  return reply(0, 0, 'paused', f[2], f[3], {})
end

-- The rate limit's token bucket (PROTOCOL.md, "Rate limits"), written once
-- for move_topic.lua and move_flow.lua (tools/lua-layouts.py puts it in both).
-- A rate or burst that is no number, or outside flow.lua's input rules (a
-- rate from one a day to 1,000,000 a second, a burst from 1 to 1,000,000),
-- is no limit: a junk field written by hand must not stall the topic.
local bucket = {}

-- The flow hash's fields per_second, burst, tokens, tokens_at (strings or
-- false) and Redis's TIME: the tokens there now (nil: no limit) and now in
-- Unix ms. Refilled at per_second up to burst since tokens_at; a clock that
-- went back (a failover) refills nothing (every spend rewrites tokens_at).
function bucket.refill(per_second, burst, tokens, tokens_at, time)
  local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local rate, size = tonumber(per_second or ''), tonumber(burst or '')
  if not (rate and size and rate >= (1 / 86400) * (1 - 1e-9) and rate <= 1000000 and size >= 1 and size <= 1000000) then
    return nil, now_ms, nil
  end
  local gap = now_ms - (tonumber(tokens_at or '') or now_ms)
  if not (gap > 0) then gap = 0 end
  local have = math.min(size, (tonumber(tokens or '') or size) + gap * rate / 1000)
  if not (have >= 0) then have = 0 end
  return have, now_ms, rate
end

-- How many of `want` ids the tokens allow now.
function bucket.allows(have, want)
  if not have then return want end
  return math.min(want, math.floor(have + 1e-9))
end

-- After `moved` ids were made ready: writes the bucket back (after the moves,
-- whose removal came first: Redis out of memory still takes it; a call that
-- moved nothing may be refused, and loses nothing), and keeps the flow hash's
-- `backlog` (since when due ids wait for tokens, "s.mmm" `now`): set by a call
-- that leaves due ids for lack of tokens, deleted by one that leaves none,
-- also once the limit is gone (the held ids drained at full speed). Returns
-- the call's flow state ("limited" or "") and next_allowed ("s.mmm" or "").
function bucket.spend(flow, have, rate, now_ms, moved, waiting, backlog, now)
  if have then
    have = have - moved
    redis.pcall('HSET', flow, 'tokens', string.format('%.17g', have), 'tokens_at', now_ms)
    if waiting and have < 1 then
      local at = now_ms + math.max(1, math.ceil((1 - have) * 1000 / rate))
      if backlog == '' then redis.pcall('HSET', flow, 'backlog', now) end
      return 'limited', string.format('%d.%03d', math.floor(at / 1000), at % 1000)
    end
  end
  if backlog ~= '' and not waiting then redis.pcall('HDEL', flow, 'backlog') end
  return '', ''
end
local tokens, now_ms, rate = bucket.refill(f[4], f[5], f[6], f[7], t)
batch = bucket.allows(tokens, batch)

local due = redis.pcall('ZRANGEBYSCORE', fpool, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch)
if due.err then
  bad(fpool, 'zset')
  return reply(0, 0, '', f[2], f[3], {})
end
local kind = redis.call('TYPE', ready).ok
if kind ~= 'list' and kind ~= 'none' then
  bad(ready, 'list')
  return reply(0, 0, '', f[2], f[3], {})
end

-- Which taken ids are stale: waiting in the pool again or reserved, read
-- for the whole batch at once (ZMSCORE, Redis 6.2; one ZSCORE per id before).
local taken_ids = {}
for i = 1, #due, 2 do taken_ids[#taken_ids + 1] = due[i] end
local function scores(key)
  if #taken_ids == 0 then return {} end
  local all = redis.pcall('ZMSCORE', key, unpack(taken_ids))
  if type(all) == 'table' and not all.err then return all end
  all = {}
  for i, id in ipairs(taken_ids) do
    local score = redis.pcall('ZSCORE', key, id)
    all[i] = type(score) == 'string' and score
  end
  return all
end
local in_pool = scores(pool)
local in_reserved = redis.call('TYPE', reserved).ok == 'zset' and scores(reserved) or {}

local ids, dues, dropped = {}, {}, 0
local want_dues = ARGV[4] == '1'
for i = 1, #due, 2 do
  local id, n = due[i], (i + 1) / 2
  local live = not in_pool[n] and not in_reserved[n] and redis.pcall('HGET', buckets .. id, 'topic') == topic
  if live then
    ids[#ids + 1] = id
    if want_dues then dues[#dues + 1] = due[i + 1] end
  else
    dropped = dropped + 1
  end
end

local taken = #due / 2
if taken > 0 then
  -- ZRANGEBYSCORE -inf now LIMIT 0 n are exactly ranks 0..n-1
  redis.call('ZREMRANGEBYRANK', fpool, 0, taken - 1)
  for from_i = 1, #ids, 4000 do
    redis.call('LPUSH', ready, unpack(ids, from_i, math.min(from_i + 3999, #ids)))
  end
  local left = redis.pcall('HINCRBY', counts, topic, -taken)
  if type(left) == 'number' then
    if left <= 0 then redis.call('HDEL', counts, topic) end
  elseif string.sub(left.err, 1, 9) == 'WRONGTYPE' then
    bad(counts, 'hash')
  end
end
local head = redis.pcall('ZRANGE', fpool, 0, 0, 'WITHSCORES')
local waiting = type(head) == 'table' and head[2] and tonumber(head[2]) <= tonumber(now) or false
local state, next_allowed = bucket.spend(flow, tokens, rate, now_ms, #ids, waiting, backlog, string.sub(now, 1, -4))
if not tokens and redis.pcall('ZCARD', fpool) == 0 then
  local r = redis.pcall('SREM', flow_set, topic)
  if type(r) ~= 'number' then bad(flow_set, 'set') end
end
local r = reply(#ids, dropped, state, f[2], f[3], dues)
r[11], r[12] = next_allowed, backlog
return r
