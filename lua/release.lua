-- release: end reservations without success, in the classic layout.
-- One home for what a failed attempt means, whoever ends it: a worker's
-- release (try again later) or bury (give up), and the server's expiry of
-- reservations past their ttr.
--
-- KEYS[1]  reserved          ZSET  <prefix>reserved (score: deadline, Unix ms)
-- KEYS[2]  job pool          ZSET  <prefix>job_pool
-- KEYS[3]  malformed list    LIST  <prefix>malformed
-- KEYS[4]  scheduled counts  HASH  <prefix>scheduled_count (a retried job
--          counts again on its topic's field)
-- KEYS[5]  outcome counts    HASH  <prefix>outcomes (each ended reservation
--          adds 1 to a field of its topic: "released:<topic>" (retried),
--          "dead_lettered:<topic>" (to dead letters, buried or out of
--          attempts) and also "buried:<topic>" (bury), which the server
--          exports)
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:" (a bucket is it + id)
-- ARGV[2]  dead-letter prefix, "<prefix>dead:" (a topic's list is it + topic)
-- ARGV[3]  what happens to the job: a delay in ms (release with a delay),
--          "backoff" (the job's own backoff), or "bury" (dead letters now)
-- ARGV[4]  "held": end one reservation held by a worker (8 ARGV, all sent)
--            ARGV[5] job id, ARGV[6] receipt, or "" for the current one,
--            ARGV[7] wake channel "<prefix>wake", or "":
--            none ("<due> <topic>" published when the new due time
--            comes before the pool's earliest, as push.lua does)
--            ARGV[8] why the attempt failed, or "": not said; kept in
--            the bucket's last_error (first 1000 bytes), so dead letters and
--            job lookups show it; e.g. a worker's "ValueError: bad order"
--            Returns the new due time "s.mmm", "dead" when the job went to
--            its dead-letter list, or nil when the reservation was not held.
--          "expired": end up to ARGV[5] reservations whose deadline passed
--            (5 ARGV)
--            Returns {taken, retried, dead, dropped, malformed_ids,
--                     next_deadline, now, held, bad_keys}; taken == ARGV[5]
--            means call again, next_deadline is the earliest deadline left
--            ("" if none), held the expired ids that could not be ended nor
--            parked (the malformed list holds the wrong type): their
--            deadline moves 10 s on, so they hold up no other, and they are
--            ended once the key is fixed; bad_keys is flat {key, type,
--            expected, ...}, each key of the wrong type met. A reserved set
--            or pool of the wrong type ends nothing and is reported there.
--
-- A failed attempt schedules the job again (pool score now + delay, also
-- kept in the bucket's due field, which the ready-queue age reads), unless
-- it was buried or its attempts reached max_attempts (0: no limit): then its
-- id goes to its dead-letter list (ARGV[2] + topic) and the bucket records why and when.
-- Reserved ids whose bucket no longer carries a receipt (removed, or pushed
-- again while reserved), or whose id waits in the pool (pushed again by a
-- 1.x-style write, which keeps the old fields), are stale: not held, and
-- dropped from the reserved set by expiry without touching the job.
-- Expiry records last_error "ttr expired"; it announces nothing: its caller,
-- the server, reads the pool head after it (PROTOCOL.md).
-- Expired ids that cannot be ended (a bucket without a topic or not a hash,
-- or a dead-letter list that is not a list) are parked on the malformed
-- list with their bucket kept, and reported.
-- Guards (PROTOCOL.md, "Operations"): every key written is checked before
-- the first write, so a call either fails before writing (held mode: a
-- WRONGTYPE error naming the key) or completes. Ending a reservation takes
-- the id off the reserved set first: that adds no memory, and Redis refuses
-- a write for maxmemory only when it is a script's first, so retries and
-- dead letters are written even when Redis is out of memory.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local reserved, pool, malformed = KEYS[1], KEYS[2], KEYS[3]
local buckets, outcomes = ARGV[1], KEYS[5]
local counts, deads, action = KEYS[4], ARGV[2], ARGV[3]
-- the mode and its arguments (ARGV[4..] here)
local mode = {unpack(ARGV, 4)}
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function seconds(ms)
  return string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
end
local now = seconds(now_ms)

-- The retry settings of a job whose pusher left them out (PROTOCOL.md, "The
-- job bucket"): reserve.lua does not write them, so this is where they apply.
local DEFAULT_MAX_ATTEMPTS, DEFAULT_BACKOFF_MS, DEFAULT_BACKOFF_MAX_MS = '25', '1000', '3600000'

-- The delay before attempt n + 1 after n failed ones: fixed, or doubling from
-- backoff_ms, never above backoff_max_ms (absent backoff: exponential).
local function backoff(kind, attempts, base, cap)
  if kind == 'fixed' then
    return base
  end
  -- The exponent stops at 62: past it every delay is over any cap, and
  -- 0 * 2^1024 (infinity) would be NaN, not a score.
  local delay = base * 2 ^ math.min(math.max(attempts - 1, 0), 62)
  return math.min(delay, cap)
end

-- The type of `key` ("none" when it does not exist).
local function kind(key)
  return redis.call('TYPE', key).ok
end
local function wrong(key, expected)
  return redis.error_reply('WRONGTYPE ' .. shown(key) .. ' is a ' .. kind(key) .. ', not a ' .. expected)
end

-- Counts one outcome of `topic` (a count only: a key of the wrong type, or
-- a field that is no integer, skips it).
local function tally(outcome, topic)
  redis.pcall('HINCRBY', outcomes, outcome .. ':' .. topic, 1)
end

-- Ends the reservation of `id` (its bucket read as `job`); returns the due
-- time or "dead", or nil and {key, type, "list"} when its dead-letter list
-- holds the wrong type (then nothing is written). The pool is known to be a
-- ZSET (or none) and the bucket a hash: no write below can fail.
local function fail(id, bucket, job, why)
  local attempts, max_attempts = tonumber(job[3]) or 0, tonumber(job[4] or DEFAULT_MAX_ATTEMPTS) or 0
  if action == 'bury' or (max_attempts > 0 and attempts >= max_attempts) then
    local reason = action == 'bury' and 'buried' or 'max_attempts'
    local list = deads .. job[1]
    local list_kind = kind(list)
    if list_kind ~= 'list' and list_kind ~= 'none' then
      return nil, {list, list_kind, 'list'}
    end
    redis.call('ZREM', reserved, id)
    redis.call('LPUSH', list, id)
    redis.call('HDEL', bucket, 'receipt')
    redis.call('HSET', bucket, 'dead_reason', reason, 'dead_at', now)
    if why ~= '' then redis.call('HSET', bucket, 'last_error', why) end
    tally('dead_lettered', job[1])
    if action == 'bury' then tally('buried', job[1]) end
    return 'dead'
  end
  local delay = tonumber(action)
  if not delay then
    delay = backoff(job[5], attempts, tonumber(job[6] or DEFAULT_BACKOFF_MS) or 0,
      tonumber(job[7] or DEFAULT_BACKOFF_MAX_MS) or 0)
  end
  local due = seconds(now_ms + math.floor(delay))
  redis.call('ZREM', reserved, id)
  redis.call('ZADD', pool, due, id)
  redis.call('HDEL', bucket, 'receipt')
  if why ~= '' then
    redis.call('HSET', bucket, 'due', due, 'last_error', why)
  else
    redis.call('HSET', bucket, 'due', due)
  end
  redis.pcall('HINCRBY', counts, job[1], 1) -- a count only: never fails the release
  tally('released', job[1])
  return due
end

local FIELDS = {'topic', 'receipt', 'attempts', 'max_attempts', 'backoff', 'backoff_ms', 'backoff_max_ms'}

if mode[1] == 'held' then
  local id, receipt = mode[2], mode[3]
  local bucket = buckets .. id
  local job = redis.pcall('HMGET', bucket, unpack(FIELDS))
  local held_at, waiting = redis.pcall('ZSCORE', reserved, id), redis.pcall('ZSCORE', pool, id)
  if type(held_at) == 'table' then return wrong(reserved, 'zset') end
  if type(waiting) == 'table' then return wrong(pool, 'zset') end
  if job.err or not job[2] or (receipt ~= '' and job[2] ~= receipt) or not job[1] or job[1] == ''
      or not held_at or waiting then
    return false
  end
  local wake = mode[4] or ''
  local head = wake ~= '' and redis.call('ZRANGE', pool, 0, 0, 'WITHSCORES')
  local outcome, bad = fail(id, bucket, job, string.sub(mode[5] or '', 1, 1000))
  if not outcome then return wrong(bad[1], 'list') end
  if head and outcome ~= 'dead' and (not head[2] or tonumber(outcome) < tonumber(head[2])) then
    redis.pcall('PUBLISH', wake, outcome .. ' ' .. job[1])
  end
  return outcome
end

local batch = tonumber(mode[2])
local bad_keys = {}
local function bad(entry)
  for _, v in ipairs(entry) do bad_keys[#bad_keys + 1] = v end
end
local expired = redis.pcall('ZRANGEBYSCORE', reserved, '-inf', now_ms, 'LIMIT', 0, batch)
if expired.err then
  bad({reserved, kind(reserved), 'zset'})
  expired = {}
elseif #expired > 0 then
  local pool_kind = kind(pool)
  if pool_kind ~= 'zset' and pool_kind ~= 'none' then
    bad({pool, pool_kind, 'zset'})
    expired = {}
  end
end
local retried, dead, dropped, malformed_ids, held_ids = 0, 0, 0, {}, {}
local parking -- whether the malformed list takes an LPUSH (checked once)
for _, id in ipairs(expired) do
  local bucket = buckets .. id
  local job = redis.pcall('HMGET', bucket, unpack(FIELDS))
  local outcome, failed = nil, nil
  local waiting = redis.call('ZSCORE', pool, id)
  if not job.err and job[1] and job[1] ~= '' and job[2] and not waiting then
    -- A key of the wrong type where fail() writes (the topic's dead list,
    -- say) costs this job only: fail() writes nothing then, and the job
    -- is parked below.
    outcome, failed = fail(id, bucket, job, 'ttr expired')
    if failed then bad(failed) end
  end
  if outcome then
    if outcome == 'dead' then dead = dead + 1 else retried = retried + 1 end
  elseif waiting or (not job.err and not job[2]) then
    redis.call('ZREM', reserved, id)
    dropped = dropped + 1
  else
    if parking == nil then
      local k = kind(malformed)
      parking = k == 'list' or k == 'none'
      if not parking then bad({malformed, k, 'list'}) end
    end
    if parking then
      redis.call('ZREM', reserved, id)
      malformed_ids[#malformed_ids + 1] = id
      redis.call('LPUSH', malformed, id)
    else
      held_ids[#held_ids + 1] = id
    end
  end
end
-- Last: moving a deadline is the one write here that may need memory, and
-- Redis allows it when another write came first. Under maxmemory with
-- nothing else written it is refused, and the id stays as it was.
for _, id in ipairs(held_ids) do
  redis.pcall('ZADD', reserved, 'XX', now_ms + 10000, id)
end
local next_deadline = redis.pcall('ZRANGE', reserved, 0, 0, 'WITHSCORES')
if next_deadline.err then next_deadline = {} end
return {#expired, retried, dead, dropped, malformed_ids,
  next_deadline[2] and seconds(tonumber(next_deadline[2])) or '', now, #held_ids, bad_keys}
