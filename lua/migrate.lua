-- migrate: move jobs of one topic from one key layout to the other
-- (`delayer migrate`, PROTOCOL.md "Switching layouts"), each job with its
-- bucket, in one step: clients and servers of either layout may run
-- meanwhile, and a job is in one layout or the other, never both or neither.
--
-- KEYS[1]  from  ZSET or LIST  one of the topic's job keys in the layout
--          moved from: its pool or reserved set (ZSET), or its ready queue
--          or dead-letter list (LIST): <prefix>job_pool, <prefix>reserved,
--          <prefix>ready_queue:<topic>, <prefix>dead:<topic>, a classic flow
--          pool (ZSET, its held jobs: waiting ones, counted as the pool's)
--          <prefix>flow_pool:<topic>, or
--          <prefix>{<topic>}:pool, <prefix>{<topic>}:reserved,
--          <prefix>{<topic>}:ready, <prefix>{<topic>}:dead
-- KEYS[2]  to    ZSET or LIST  the same kind in the layout moved to:
--          <prefix>{<topic>}:pool, <prefix>{<topic>}:reserved,
--          <prefix>{<topic>}:ready, <prefix>{<topic>}:dead, or
--          <prefix>job_pool, <prefix>reserved, <prefix>ready_queue:<topic>,
--          <prefix>dead:<topic>
-- KEYS[3]  scheduled counts  HASH  <prefix>scheduled_count (in every call;
--          written only when KEYS[1] or KEYS[2] is the classic pool, or
--          KEYS[1] a flow pool)
-- ARGV[1]  bucket prefix moved from: <prefix>job_bucket: or <prefix>{<topic>}:job:
-- ARGV[2]  bucket prefix moved to, the other of the two
-- ARGV[3]  topic
-- ARGV[4]  "zset": ARGV[6..] the ids to move (score kept)
--          "list": ARGV[6] the most ids to move, oldest (right end) first,
--          pushed on the left of KEYS[2] (so they leave it in the same order)
-- ARGV[5]  KEYS[3]'s side: "from" (the counts lose the jobs moved), "to"
--          (they gain them), or "" (neither key is the classic pool: KEYS[3]
--          is left alone)
--
-- Returns {moved, skipped, kept_ids}
--   moved     jobs moved with their buckets
--   skipped   (zset) ids no longer in KEYS[1], or whose bucket is gone or
--             another topic's: left alone (the mover drops or parks them);
--             (list) entries whose bucket is gone or another topic's (stale:
--             pop would skip them too): removed
--   kept_ids  ids left where they were because the destination already
--             holds a job with that id (pushed in the other layout
--             meanwhile, or, towards the classic layout, another topic's
--             job: ids are global there)
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local from_buckets, to_buckets, topic, mode, side = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local moved, skipped, kept = 0, 0, {}

-- 'move', 'drop' or 'keep' for `id`, by its bucket on both sides.
local function verdict(id)
  local owner = redis.pcall('HGET', from_buckets .. id, 'topic')
  if type(owner) ~= 'string' or owner ~= topic then
    return 'drop'
  end
  if redis.call('EXISTS', to_buckets .. id) == 1 then
    return 'keep'
  end
  return 'move'
end

-- The destination is checked before the first write (a list-mode RPOP
-- comes before its LPUSH): a call either fails before writing or completes.
local want = mode == 'zset' and 'zset' or 'list'
local to_kind = redis.call('TYPE', KEYS[2]).ok
if to_kind ~= want and to_kind ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. shown(KEYS[2]) .. ' is a ' .. to_kind .. ', not a ' .. want)
end

if mode == 'zset' then
  for i = 6, #ARGV do
    local id = ARGV[i]
    local score = redis.call('ZSCORE', KEYS[1], id)
    local v = score and verdict(id) or 'drop'
    if v == 'move' then
      -- ZADD first: Redis does not roll back, and it is the call that can
      -- fail (a key of the wrong type); failing first leaves the job where it was.
      redis.call('ZADD', KEYS[2], score, id)
      redis.call('ZREM', KEYS[1], id)
      redis.call('RENAME', from_buckets .. id, to_buckets .. id)
      moved = moved + 1
    elseif v == 'keep' then
      kept[#kept + 1] = id
    else
      skipped = skipped + 1
    end
  end
elseif mode == 'list' then
  for _ = 1, tonumber(ARGV[6]) do
    local id = redis.call('RPOP', KEYS[1])
    if not id then break end
    local v = verdict(id)
    if v == 'move' then
      redis.call('RENAME', from_buckets .. id, to_buckets .. id)
      redis.call('LPUSH', KEYS[2], id)
      moved = moved + 1
    elseif v == 'drop' then
      skipped = skipped + 1
    else
      -- Back where it was, and no further: the next would be the same.
      redis.call('RPUSH', KEYS[1], id)
      kept[#kept + 1] = id
      break
    end
  end
else
  return redis.error_reply('ERR migrate.lua: unknown mode "' .. tostring(mode) .. '"')
end

if KEYS[3] and moved > 0 and side ~= '' then
  local n = side == 'to' and moved or -moved
  -- a count only: never fails the move
  local left = redis.pcall('HINCRBY', KEYS[3], topic, n)
  if type(left) == 'number' and left <= 0 then redis.call('HDEL', KEYS[3], topic) end
end
return {moved, skipped, kept}
