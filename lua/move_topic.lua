-- move_topic: move one batch of one topic's due jobs from its pool to its
-- ready queue (the per-topic layout's server write, PROTOCOL.md "The
-- per-topic layout"; atomic, so any number of servers can run).
--
-- KEYS[1]  the topic's pool      ZSET  <prefix>{<topic>}:pool
-- KEYS[2]  the topic's ready     LIST  <prefix>{<topic>}:ready
-- KEYS[3]  the topic's reserved  ZSET  <prefix>{<topic>}:reserved
-- KEYS[4]  the topic's flow      HASH  <prefix>{<topic>}:flow (fields "paused",
--          "resumed", "last_paused", the limit's "per_second", "burst",
--          "tokens", "tokens_at", "backlog"; PROTOCOL.md "Flow control")
-- ARGV[1]  batch size: the most ids taken from the pool in this call
--
-- Returns {taken, next_due, now, oldest_due, newest_due, pool_size, bad_keys,
-- flow, resumed, last_paused, next_allowed, backlog}
--   taken        ids moved; taken == batch size means more may be due
--   next_due     score of the earliest job left in the pool, "" if none
--   now          Redis's clock, Unix seconds "s.uuuuuu"
--   oldest_due   score of the first id moved, "" if none
--   newest_due   score of the last id moved, "" if none (ids leave in due
--                order: with now, the batch's most and least lateness)
--   pool_size    ids left in the pool
--   bad_keys     {KEYS[3], its type, "zset"} when the reserved key holds the
--                wrong type: its stale reservations were not ended; else {}
--   flow         "paused" when the topic is paused: nothing is moved and
--                next_due is "" (its due jobs wait in the pool, held, until
--                a resume announces the topic); "limited" when its rate
--                limit left due jobs in the pool; else ""
--   resumed      the flow hash's "resumed" (the last resume, "s.mmm"), and
--   last_paused  its "last_paused" (when that pause began), "" if absent:
--                a moved job due before the resume waited for the pause,
--                which the server counts as held, not as its own lateness
--   next_allowed "limited": when the next job's token is there (Unix
--                seconds "s.mmm"), the topic's next time; else ""
--   backlog      the flow hash's "backlog" when the call began: since when
--                due jobs have been waiting for tokens ("s.mmm"), else "": a
--                moved job then waited for the limit (held, not late)
-- The rate limit is a token bucket in the flow hash (PROTOCOL.md, "Rate
-- limits"; lua/includes/bucket.lua, shared with move_flow.lua): refilled at
-- per_second up to burst since tokens_at, one token taken per id moved, so
-- any number of servers together move at most burst + per_second * t ids in
-- any t seconds.
-- A pool, ready or flow key of the wrong type fails the call before any write,
-- with a WRONGTYPE error naming the key: the topic's jobs stay where they
-- are (the server sets the topic aside, PROTOCOL.md "The per-topic layout").
--
-- Every id in the pool is the topic's, so nothing is read per job: this is
-- what makes the layout's drain fast. An id whose bucket expired or is
-- malformed is still moved; pop and reserve skip or park it when they meet
-- it, as they do in the classic layout. A moved id still in the reserved set
-- (pushed again by a 1.x-style write while reserved) loses that stale
-- reservation here, as in move.lua.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local pool, ready, reserved = KEYS[1], KEYS[2], KEYS[3]
local batch = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))

local function kind(key)
  return redis.call('TYPE', key).ok
end
local function wrong(key, expected)
  return redis.error_reply('WRONGTYPE ' .. shown(key) .. ' is a ' .. kind(key) .. ', not a ' .. expected)
end

local flow = redis.pcall('HMGET', KEYS[4], 'paused', 'resumed', 'last_paused', 'per_second', 'burst', 'tokens',
  'tokens_at', 'backlog')
if flow.err then return wrong(KEYS[4], 'hash') end
local resumed, last_paused, backlog = flow[2] or '', flow[3] or '', flow[8] or ''
if flow[1] then
  return {0, '', t[1] .. '.' .. string.format('%06d', tonumber(t[2])), '', '', redis.call('ZCARD', pool), {}, 'paused',
    resumed, last_paused, '', backlog}
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
local tokens, now_ms, rate = bucket.refill(flow[4], flow[5], flow[6], flow[7], t)
batch = bucket.allows(tokens, batch)

-- Ids without scores, and two scores for the batch's lateness: formatting
-- a score per job would cost Redis as much as the whole move.
-- (LIMIT 0 0, no token, reads nothing)
local ids = redis.pcall('ZRANGEBYSCORE', pool, '-inf', now, 'LIMIT', 0, batch)
if ids.err then return wrong(pool, 'zset') end
local taken, bad_keys = #ids, {}
local oldest, newest = '', ''
if taken > 0 then
  -- The key written is checked before the first write (PROTOCOL.md,
  -- "Operations"): a failing call leaves everything where it was.
  local queue = kind(ready)
  if queue ~= 'list' and queue ~= 'none' then return wrong(ready, 'list') end
  oldest, newest = redis.call('ZSCORE', pool, ids[1]), redis.call('ZSCORE', pool, ids[taken])
  -- The pool's removal first: it adds no memory, and Redis refuses a write
  -- for maxmemory only when it is a script's first, so the LPUSH after it
  -- moves the jobs even when Redis is out of memory.
  redis.call('ZREMRANGEBYRANK', pool, 0, taken - 1)
  redis.call('LPUSH', ready, unpack(ids))
  local held = reserved and kind(reserved)
  if held == 'zset' then
    redis.call('ZREM', reserved, unpack(ids))
  elseif held and held ~= 'none' then
    bad_keys = {reserved, held, 'zset'}
  end
end

local next_due = redis.call('ZRANGE', pool, 0, 0, 'WITHSCORES')
local waiting = next_due[2] and tonumber(next_due[2]) <= tonumber(now) or false
local state, next_allowed = bucket.spend(KEYS[4], tokens, rate, now_ms, taken, waiting, backlog, now)
return {taken, next_due[2] or '', t[1] .. '.' .. string.format('%06d', tonumber(t[2])), oldest, newest,
  redis.call('ZCARD', pool), bad_keys, state, resumed, last_paused, next_allowed, backlog}
