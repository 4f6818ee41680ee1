-- history: the dashboard's moving history, shared by every server through
-- Redis so that any server, and a restarted one, shows the same: one sample
-- per 10 seconds, kept a day. Each server writes its own part of a sample,
-- replacing what it wrote there before (idempotent: a server writes the
-- sample in progress every few seconds, and a retry counts nothing twice).
--
-- KEYS[1]  history  ZSET  <prefix>history (score: the sample's start, Unix
--          seconds; member: JSON {"t": start, "by": {server: [moved,
--          lateness_sum_ms, lateness_count, lateness_max_ms]}})
-- ARGV[1]  the sample's start (Unix seconds)
-- ARGV[2]  the writing server's id
-- ARGV[3]  moved
-- ARGV[4]  lateness_sum_ms
-- ARGV[5]  lateness_count
-- ARGV[6]  lateness_max_ms
-- ARGV[7]  the oldest start kept (older samples are dropped)
-- ARGV[8]  most samples kept
-- ARGV[9]  most servers' parts in one sample (the rest are added up under "_")
--
-- Returns the number of members dropped as unreadable (not this script's
-- JSON), or an error naming the key when it is not a sorted set.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local key = KEYS[1]
local kind = redis.call('TYPE', key)
kind = type(kind) == 'table' and kind.ok or kind
if kind ~= 'zset' and kind ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. key .. ' is a ' .. kind .. ', not the sorted set of the history')
end
local start, server = tonumber(ARGV[1]), ARGV[2]
local part = {tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0}
local most_servers = tonumber(ARGV[9]) or 64

local by, bad, servers = {}, 0, 0
for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, start, start)) do
  local ok, sample = pcall(cjson.decode, member)
  if ok and type(sample) == 'table' and type(sample.by) == 'table' then
    for name, numbers in pairs(sample.by) do
      if type(name) == 'string' and type(numbers) == 'table' and by[name] == nil then
        by[name] = numbers
        servers = servers + 1
      end
    end
  else
    bad = bad + 1
  end
end
if by[server] == nil and servers >= most_servers then
  -- Too many servers for one sample: this one's part joins the sum.
  local rest = by['_'] or {0, 0, 0, 0}
  for i = 1, 3 do rest[i] = (tonumber(rest[i]) or 0) + part[i] end
  rest[4] = math.max(tonumber(rest[4]) or 0, part[4])
  by['_'] = rest
else
  by[server] = part
end
redis.call('ZREMRANGEBYSCORE', key, start, start)
redis.call('ZADD', key, start, cjson.encode({t = start, by = by}))
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. ARGV[7])
local most = tonumber(ARGV[8]) or 8640
if redis.call('ZCARD', key) > most then
  redis.call('ZREMRANGEBYRANK', key, 0, -most - 1)
end
return bad
