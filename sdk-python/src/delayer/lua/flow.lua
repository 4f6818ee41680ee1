-- flow: read, pause or resume one topic's flow control, in the classic layout.
-- (delayer pause / resume, the SDKs' pause, resume and is_paused, HTTP
-- POST /v1/topics/{topic}/pause and /resume; PROTOCOL.md, "Flow control").
--
-- KEYS[1]  flow hash    HASH  <prefix>flow:<topic>
-- KEYS[2]  gate         LIST  <prefix>flow_gate:<topic>
-- KEYS[3]  flow topics  SET   <prefix>flow_topics
-- KEYS[4]  flow pool    ZSET  <prefix>flow_pool:<topic> (held jobs, counted)
-- ARGV[1]  topic
-- ARGV[2]  action: "get", "pause" or "resume"
-- ARGV[3]  wake channel "<prefix>wake" (a resume announces "<now> <topic>")
--
-- Returns {paused_since, changed, now, held}
--   paused_since  "s.mmm" while the topic is paused (after the action), else ""
--   changed       1 when the action changed the state (a pause of a running
--                 topic, a resume of a paused one), else 0
--   now           Redis's clock, "s.mmm"
--   held          due jobs the pause holds back: in the topic's flow pool (the
--                 server sets them aside there)
--
-- pause:  DEL gate (first: a removal, so Redis takes the call even when out
--         of memory), so waiters block on it, then HSET paused <now> (kept
--         when already paused).
--         The topic is listed in KEYS[3], so the server sets its due jobs
--         aside. A pause or resume also lists it while its flow pool holds
--         ids (a list edited by hand would strand them otherwise).
-- resume: HDEL paused, HSET resumed <now> and last_paused <paused since> (the
--         server splits a held job's wait with them), then DEL, RPUSH "1"
--         and PEXPIRE 60000 the gate (one element wakes every waiter) and
--         PUBLISH "<now> <topic>" on the wake channel (under pcall: a
--         replica's refusal does not undo the resume).
-- Types are checked before any write: a flow hash (or flow topics set) of the
-- wrong type is a WRONGTYPE error naming it, and nothing is written. The gate
-- is only ever deleted and rewritten, whatever it holds.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local flow, gate, topic, action = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local topics = KEYS[3]
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local function check(key, expected)
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= expected then
    return redis.error_reply('WRONGTYPE ' .. shown(key) .. ' is a ' .. kind .. ', not a ' .. expected)
  end
end
if action ~= 'get' and action ~= 'pause' and action ~= 'resume' then
  return redis.error_reply('ERR flow: unknown action ' .. shown(action) .. ' (get, pause or resume)')
end
local err = check(flow, 'hash')
err = err or check(topics, 'set')
if err then return err end

local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
local since = redis.call('HGET', flow, 'paused')
local changed = 0
if action == 'pause' then
  redis.call('DEL', gate)
  if not since then
    redis.call('HSET', flow, 'paused', now)
    since, changed = now, 1
  end
  redis.call('SADD', topics, topic)
elseif action == 'resume' and since then
  redis.call('HDEL', flow, 'paused')
  redis.call('HSET', flow, 'resumed', now, 'last_paused', since)
  redis.call('DEL', gate)
  redis.call('RPUSH', gate, '1')
  redis.call('PEXPIRE', gate, 60000)
  if ARGV[3] ~= '' then redis.pcall('PUBLISH', ARGV[3], now .. ' ' .. topic) end
  since, changed = nil, 1
end

local held = redis.pcall('ZCARD', KEYS[4])
if action == 'resume' and type(held) == 'number' and held > 0 then redis.call('SADD', topics, topic) end
if type(held) ~= 'number' then held = 0 end
return {since or '', changed, now, held}
