-- move_topic: move one batch of one topic's due jobs from its pool to its
-- ready queue (the per-topic layout's server write, PROTOCOL.md "The
-- per-topic layout"; atomic, so any number of servers can run).
--
-- KEYS[1]  the topic's pool      ZSET  <prefix>{<topic>}:pool
-- KEYS[2]  the topic's ready     LIST  <prefix>{<topic>}:ready
-- KEYS[3]  the topic's reserved  ZSET  <prefix>{<topic>}:reserved (optional)
-- ARGV[1]  batch size: the most ids taken from the pool in this call
--
-- Returns {taken, next_due, now, oldest_due, newest_due, pool_size}
--   taken        ids moved; taken == batch size means more may be due
--   next_due     score of the earliest job left in the pool, "" if none
--   now          Redis's clock, Unix seconds "s.uuuuuu"
--   oldest_due   score of the first id moved, "" if none
--   newest_due   score of the last id moved, "" if none (ids leave in due
--                order: with now, the batch's most and least lateness)
--   pool_size    ids left in the pool
--
-- Every id in the pool is the topic's, so nothing is read per job: this is
-- what makes the layout's drain fast. An id whose bucket expired or is
-- malformed is still moved; pop and reserve skip or park it when they meet
-- it, as they do in the classic layout. A moved id still in the reserved set
-- (pushed again by a 1.x-style write while reserved) loses that stale
-- reservation here, as in move.lua.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local pool, ready, reserved = KEYS[1], KEYS[2], KEYS[3]
local batch = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))

-- Ids without scores, and two scores for the batch's lateness: formatting
-- a score per job would cost Redis as much as the whole move.
local ids = redis.call('ZRANGEBYSCORE', pool, '-inf', now, 'LIMIT', 0, batch)
local oldest = #ids > 0 and redis.call('ZSCORE', pool, ids[1]) or ''
local newest = #ids > 0 and redis.call('ZSCORE', pool, ids[#ids]) or ''

local taken = #ids
if taken > 0 then
  redis.call('LPUSH', ready, unpack(ids))
  if reserved and redis.call('EXISTS', reserved) == 1 then
    redis.call('ZREM', reserved, unpack(ids))
  end
  redis.call('ZREMRANGEBYRANK', pool, 0, taken - 1)
end

local next_due = redis.call('ZRANGE', pool, 0, 0, 'WITHSCORES')
return {taken, next_due[2] or '', t[1] .. '.' .. string.format('%06d', tonumber(t[2])), oldest, newest,
  redis.call('ZCARD', pool)}
