-- flow_topic: read, pause, resume or rate-limit one topic, in the per-topic layout.
-- (delayer pause / resume / limit, the SDKs' pause, resume, is_paused,
-- set_rate_limit and clear_rate_limit, HTTP POST /v1/topics/{topic}/pause and
-- /resume, PUT and DELETE /v1/topics/{topic}/limit; PROTOCOL.md, "Flow control").
--
-- KEYS[1]  flow hash    HASH  <prefix>{<topic>}:flow
-- KEYS[2]  gate         LIST  <prefix>{<topic>}:gate
-- KEYS[3]  pool         ZSET  <prefix>{<topic>}:pool (its due jobs are held, counted)
-- ARGV[1]  topic
-- ARGV[2]  action: "get", "pause", "resume", "limit" or "unlimit"
-- ARGV[3]  wake channel "<prefix>wake" (a resume or a limit change announces
--          "<now> <topic>")
-- ARGV[4]  limit: jobs per second, a decimal ("50", "0.5"); else "" or absent
-- ARGV[5]  limit: burst, a whole number of jobs; "" or absent = one second's
--          worth, max(1, ceil(per second))
--
-- Returns {paused_since, changed, now, held, per_second, burst}
--   paused_since  "s.mmm" while the topic is paused (after the action), else ""
--   changed       1 when the action changed the state (a pause of a running
--                 topic, a resume of a paused one, a new rate or burst, an
--                 unlimit of a limited topic), else 0
--   now           Redis's clock, "s.mmm"
--   held          due jobs the pause holds back: those of the pool due by now
--                 (0 while running and unlimited)
--   per_second    the rate limit after the action, as stored ("" = none)
--   burst         its burst ("" = none)
--
-- pause:  DEL gate (first: a removal, so Redis takes the call even when out
--         of memory), so waiters block on it, then HSET paused <now> (kept
--         when already paused).
-- resume: HDEL paused, HSET resumed <now> and last_paused <paused since> (the
--         server splits a held job's wait with them), then DEL, RPUSH "1"
--         and PEXPIRE 60000 the gate (one element wakes every waiter) and
--         PUBLISH "<now> <topic>" on the wake channel (under pcall: a
--         replica's refusal does not undo the resume).
-- limit:  checks ARGV[4] and ARGV[5] (a bad one is an error
--         "ERR invalid argument: <why>", which every SDK raises as its
--         invalid-argument error), settles the token bucket at the old rate
--         up to now, then HSETs per_second, burst, tokens (the old content,
--         at most the new burst; a full bucket for a topic not limited
--         before) and tokens_at (Redis's clock, ms). The movers take one
--         token per job they make ready (move_topic.lua, move_flow.lua).
--         Announced like a resume, so every server looks at the topic now.
-- unlimit: HDELs the four limit fields (a backlog the limit held drains at
--         full speed), announced.
-- Types are checked before any write: a flow hash (or flow topics set) of the
-- wrong type is a WRONGTYPE error naming it, and nothing is written. The gate
-- is only ever deleted and rewritten, whatever it holds.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local flow, gate, topic, action = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local function check(key, expected)
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= expected then
    return redis.error_reply('WRONGTYPE ' .. shown(key) .. ' is a ' .. kind .. ', not a ' .. expected)
  end
end
if action ~= 'get' and action ~= 'pause' and action ~= 'resume' and action ~= 'limit' and action ~= 'unlimit' then
  return redis.error_reply('ERR flow: unknown action ' .. shown(action) .. ' (get, pause, resume, limit or unlimit)')
end
local function invalid(why)
  return redis.error_reply('ERR invalid argument: ' .. why)
end
-- The limit's rules (PROTOCOL.md, "Rate limits"), here once for every SDK,
-- the CLI and HTTP.
-- A number as the shortest text that reads back as it ("50" whether an SDK
-- sent "50", "50.0" or "5e1"): stored and quoted alike whoever sent it.
local function decimal(x)
  for digits = 15, 17 do
    local text = string.format('%.' .. digits .. 'g', x)
    if tonumber(text) == x then return text end
  end
  return string.format('%.17g', x)
end
local rate, rate_text, burst
if action == 'limit' then
  local given = ARGV[4] or ''
  -- A decimal only: Lua's tonumber also takes hex and spaces. Each SDK
  -- spells infinity and NaN its own way (inf, INF, NaN, nan, ...).
  local word = string.lower(given)
  if string.find(word, '^[+-]?inf') or string.find(word, '^[+-]?nan') then
    return invalid('the rate must be a finite number of jobs per second')
  end
  rate = string.find(given, '^[%d%.eE+-]+$') and tonumber(given)
  if not rate then
    return invalid('the rate must be a number of jobs per second, got "' .. shown(given) .. '"')
  elseif rate ~= rate or rate == math.huge or rate == -math.huge then
    return invalid('the rate must be a finite number of jobs per second')
  elseif rate == 0 then
    return invalid('a rate of 0 would stop the topic: pause it instead (pause(topic) / delayer pause <topic>)')
  elseif rate < 0 then
    return invalid('the rate must be more than 0 jobs per second, got ' .. decimal(rate))
  elseif rate < (1 / 86400) * (1 - 1e-9) then
    return invalid('the rate must be at least one job a day (1/86400 per second), got ' .. decimal(rate))
  elseif rate > 1000000 then
    return invalid('the rate must be at most 1000000 jobs per second, got ' .. decimal(rate))
  end
  rate_text = decimal(rate)
  local b = ARGV[5] or ''
  if b == '' then
    burst = math.max(1, math.ceil(rate))
  else
    burst = string.find(b, '^%d+$') and tonumber(b)
    if not burst or burst ~= math.floor(burst) or burst < 1 or burst > 1000000 then
      return invalid('the burst must be a whole number of jobs from 1 to 1000000, got "' .. shown(b) .. '"')
    elseif burst < rate / 100 then
      return invalid('the burst must be at least 1% of the rate per second (' .. shown(b) .. ' at ' .. rate_text ..
        '/s would cap the rate below it)')
    end
  end
end
local err = check(flow, 'hash')
if err then return err end

local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', flow, 'paused', 'per_second', 'burst', 'tokens', 'tokens_at')
local since, per_second, old_burst = state[1], state[2], state[3]
local changed = 0
if action == 'pause' then
  redis.call('DEL', gate)
  if not since then
    redis.call('HSET', flow, 'paused', now)
    since, changed = now, 1
  end
elseif action == 'resume' and since then
  redis.call('HDEL', flow, 'paused')
  redis.call('HSET', flow, 'resumed', now, 'last_paused', since)
  redis.call('DEL', gate)
  redis.call('RPUSH', gate, '1')
  redis.call('PEXPIRE', gate, 60000)
  if ARGV[3] ~= '' then redis.pcall('PUBLISH', ARGV[3], now .. ' ' .. topic) end
  since, changed = nil, 1
elseif action == 'limit' then
  -- Settle the bucket at the old rate up to now (the same refill as the
  -- movers'), then keep at most the new burst of it.
  local old_rate, old_b = tonumber(per_second or ''), tonumber(old_burst or '')
  local tokens = burst
  if old_rate and old_b and old_rate > 0 then
    local have, at = tonumber(state[4] or '') or old_b, tonumber(state[5] or '') or now_ms
    local gap = now_ms - at
    if not (gap > 0) then gap = 0 end
    tokens = math.min(old_b, have + gap * old_rate / 1000)
    if not (tokens >= 0) then tokens = 0 end
    tokens = math.min(tokens, burst)
  end
  if per_second ~= rate_text or old_burst ~= tostring(burst) then changed = 1 end
  redis.call('HSET', flow, 'per_second', rate_text, 'burst', tostring(burst), 'tokens', string.format('%.17g', tokens),
    'tokens_at', tostring(now_ms))
  per_second, old_burst = rate_text, tostring(burst)
  if ARGV[3] ~= '' then redis.pcall('PUBLISH', ARGV[3], now .. ' ' .. topic) end
elseif action == 'unlimit' and per_second then
  redis.call('HDEL', flow, 'per_second', 'burst', 'tokens', 'tokens_at')
  if ARGV[3] ~= '' then redis.pcall('PUBLISH', ARGV[3], now .. ' ' .. topic) end
  per_second, old_burst, changed = nil, nil, 1
end

local held = (since or per_second) and redis.pcall('ZCOUNT', KEYS[3], '-inf', now) or 0
if type(held) ~= 'number' then held = 0 end
return {since or '', changed, now, held, per_second or '', old_burst or ''}
