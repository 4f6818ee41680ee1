-- list: one page of a topic's jobs in a ZSET, by score (scheduled jobs by
-- due time from the pool, reservations by deadline from the reserved set).
--
-- KEYS[1]  the ZSET  <prefix>job_pool or <prefix>reserved
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[2]  topic
-- ARGV[3]  start rank in the ZSET (0: the lowest score)
-- ARGV[4]  most entries returned, integer >= 1
-- ARGV[5]  most entries examined in this call, integer >= 1 (bounds the
--          time Redis spends here when the topic is rare in the ZSET)
-- ARGV[6]  optional: "ready" lists a ready queue instead: KEYS[1] is
--          <prefix>ready_queue:<topic>, ARGV[3] the offset from its right end
--          (the next id out is 0), ARGV[4] the count; every id is the
--          topic's and its score is "" (the same as an LRANGE from the right,
--          for clients that only send scripts); or "reserved": KEYS[1] is
--          <prefix>reserved, whose scores (deadlines in Unix ms) are returned
--          in seconds, "s.mmm", as every other time
--
-- Returns {next_rank, id1, score1, id2, score2, ...}: the ids whose bucket's
-- topic is ARGV[2], lowest score first. next_rank is "" when the end of the
-- ZSET was reached, else the rank to pass next time. A page may hold fewer
-- than ARGV[4] entries (even none) while next_rank is not "": keep going.
--
-- Ranks shift as jobs come and go, so a listing that pages while the ZSET
-- changes can skip or repeat entries, as any offset paging does; each page
-- is a consistent snapshot. Read-only.
local start, want, budget = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if ARGV[6] == 'ready' then
  -- one more than wanted, to tell whether a next page exists
  local ids = redis.call('LRANGE', KEYS[1], -start - want - 1, -start - 1)
  local out = {#ids > want and tostring(start + want) or ''}
  for i = #ids, math.max(#ids - want + 1, 1), -1 do
    out[#out + 1] = ids[i]
    out[#out + 1] = ''
  end
  return out
end
local in_ms = ARGV[6] == 'reserved'
local function seconds(score)
  local ms = tonumber(score)
  return string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
end
local entries = redis.call('ZRANGE', KEYS[1], start, start + budget - 1, 'WITHSCORES')
local out = {''}
local examined = 0
for i = 1, #entries, 2 do
  if (#out - 1) / 2 == want then break end
  examined = examined + 1
  local topic = redis.pcall('HGET', ARGV[1] .. entries[i], 'topic')
  if topic == ARGV[2] then
    out[#out + 1] = entries[i]
    out[#out + 1] = in_ms and seconds(entries[i + 1]) or entries[i + 1]
  end
end
if examined < #entries / 2 or #entries / 2 == budget then
  out[1] = tostring(start + examined)
end
return out
