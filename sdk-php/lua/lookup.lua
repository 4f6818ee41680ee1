-- lookup: where one job is and what it carries, read-only ("was order 42's
-- auto-close scheduled, and when does it fire?").
--
-- KEYS[1]  job bucket  HASH  <prefix>job_bucket:<id>
-- KEYS[2]  job pool    ZSET  <prefix>job_pool
-- KEYS[3]  reserved    ZSET  <prefix>reserved (score: deadline, Unix ms)
-- KEYS[4]  flow hash   HASH  <prefix>flow:<topic> of ARGV[2]'s topic
-- ARGV[1]  job id
-- ARGV[2]  topic the caller expects, or "": any
-- ARGV[3]  flow-pool prefix "<prefix>flow_pool:" (classic layout), or "" (or
--          absent): none. A job not in KEYS[2] but set aside in
--          "<ARGV[3]><bucket's topic>" (its topic paused or rate limited) is
--          "scheduled" with that ZSET's score; one of the wrong type is ignored
--
-- Returns {state, topic, body_size, attempts, max_attempts, time,
--          dead_reason, last_error, traceparent, flow}, "" for what is not known:
--   state  "scheduled"  waiting in the pool, or set aside in its topic's
--                       flow pool (ARGV[3]); time = due time (the score)
--          "ready"      due and in its ready queue (not waiting, reserved
--                       or dead); time ""
--          "reserved"   held by a worker; time = the reservation's deadline
--          "dead"       in its dead-letter list; time = dead_at
--          "malformed"  the bucket has no topic, or is not a hash
--          "unknown"    no bucket (never pushed, done, removed or expired),
--                       or a bucket of another topic than ARGV[2]
--   attempts      reservations so far ("0" when never reserved)
--   max_attempts  as pushed, "" when not set (then 25 applies)
--   dead_reason   "buried" / "max_attempts" while dead
--   last_error    the last failed attempt's error (release.lua), if any
--   traceparent   as push wrote it (the caller checks its form), if any
--   flow          "paused" while the job's topic is paused (KEYS[4] has the
--                 field, or is of the wrong type: nothing of the topic is
--                 handed out then either), else "": a scheduled job of a paused
--                 topic is not made ready when due, a ready one not handed out;
--                 "limited" while the topic has a rate limit (a due job waits
--                 for its token before it becomes ready)
--
-- The states follow PROTOCOL.md's rules for stale entries: a dead bucket is
-- dead even if a 1.x-style push put its id back in the pool, and a reserved
-- entry counts only while the bucket carries its receipt and the id does not
-- wait in the pool. "ready" is what is left, so no ready queue is scanned:
-- O(1) whatever the backlog.
local kind = redis.call('TYPE', KEYS[1])
kind = type(kind) == 'table' and kind.ok or kind
if kind == 'none' then
  return {'unknown', '', '', '', '', '', '', '', '', ''}
end
if kind ~= 'hash' then
  return {'malformed', '', '', '', '', '', '', '', '', ''}
end
local f = redis.call('HMGET', KEYS[1], 'topic', 'attempts', 'max_attempts', 'dead_reason', 'dead_at',
  'last_error', 'receipt', 'traceparent')
local topic = f[1]
if not topic or topic == '' then
  return {'malformed', '', tostring(redis.call('HSTRLEN', KEYS[1], 'body')), f[2] or '0', f[3] or '', '', '', f[6] or '',
          f[8] or '', ''}
end
if ARGV[2] ~= '' and topic ~= ARGV[2] then
  return {'unknown', '', '', '', '', '', '', '', '', ''}
end
local flow = ''
if ARGV[2] ~= '' then
  local f = redis.pcall('HMGET', KEYS[4], 'paused', 'per_second')
  if f.err or f[1] then flow = 'paused' elseif f[2] then flow = 'limited' end
end
local state, time = 'ready', ''
local due = redis.call('ZSCORE', KEYS[2], ARGV[1])
if f[4] then
  state, time = 'dead', f[5] or ''
elseif due then
  state, time = 'scheduled', due
else
  local deadline = f[7] and redis.call('ZSCORE', KEYS[3], ARGV[1])
  if deadline then -- the reserved set's scores are in ms
    local ms = tonumber(deadline)
    state, time = 'reserved', string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
  elseif (ARGV[3] or '') ~= '' then -- set aside (a stale entry of a reserved job is not)
    local held = redis.pcall('ZSCORE', ARGV[3] .. topic, ARGV[1])
    if type(held) == 'string' then state, time = 'scheduled', held end
  end
end
return {state, topic, tostring(redis.call('HSTRLEN', KEYS[1], 'body')), f[2] or '0', f[3] or '',
        time, f[4] or '', f[6] or '', f[8] or '', flow}
