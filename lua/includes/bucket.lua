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
