-- pop: hand out the next ready job of one topic, at most once (delayer's POP).
--
-- KEYS[1]  ready queue     LIST  <prefix>ready_queue:<topic>
-- KEYS[2]  malformed list  LIST  <prefix>malformed
-- KEYS[3]  job pool        ZSET  <prefix>job_pool
-- KEYS[4]  reserved        ZSET  <prefix>reserved
-- KEYS[5]  flow control    HASH  <prefix>flow:<topic> (field "paused")
-- KEYS[6]  flow gate       LIST  <prefix>flow_gate:<topic>
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
--
-- Returns {id, topic, body, traceparent}, or nil when the queue holds no
-- live job. traceparent is the bucket's field as push wrote it, "" when
-- absent (the caller checks its form: anyone may have written it).
-- While the topic is paused (its flow hash has "paused") nothing is taken:
-- the reply is the wait instruction {"paused", PAUSED_RECHECK_MS, gate},
-- "wait on this key for at most this long, then ask again"; the gate is
-- deleted, so the wait blocks until a resume writes it (PROTOCOL.md, "Flow
-- control"). A flow hash of the wrong type fails closed: the error names it.
--
-- The id leaves the queue and its bucket is deleted in one step, so no other
-- consumer can get it. Ids whose bucket is gone (expired, or removed after the
-- move) are dropped and skipped: a consumer never sees an empty job. An id
-- whose bucket has no topic, or is not a hash, is parked on the malformed
-- list (bucket kept), as move.lua does: reported, not lost.
-- A stale entry is dropped too: one left by an earlier push of an id that
-- has since been pushed again (the id waits in the pool, or in its new
-- topic's flow pool), reserved, or died.
-- Handing it out would deliver the newer job before its due time.
-- Guards (PROTOCOL.md, "Operations"): an id popped is never lost to a key
-- of the wrong type. A malformed list of the wrong type sends the id back
-- to the pool, due now (ZADD NX: a time it has there is kept), where the
-- server holds it and names the key; a pool or reserved set of the wrong
-- type puts it back on the queue and returns the error.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- Parks a malformed id (a failed LPUSH writes nothing); returns an error
-- reply when it had to go back on the queue.
local function park(id)
  if type(redis.pcall('LPUSH', KEYS[2], id)) == 'number' then return nil end
  local t = redis.call('TIME')
  local back = redis.pcall('ZADD', KEYS[3], 'NX', t[1] .. '.' .. string.format('%03d', math.floor(t[2] / 1000)), id)
  if type(back) == 'table' then
    redis.call('RPUSH', KEYS[1], id)
    return back
  end
end

-- How long a consumer told to wait on the gate waits before asking again
-- (take.lua and reserve.lua say the same; a conformance test holds them).
local PAUSED_RECHECK_MS = 5000
-- A key for an error message: bytes outside printable ASCII as \xNN, since
-- clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
local paused = redis.pcall('HGET', KEYS[5], 'paused')
if type(paused) == 'table' then
  return redis.error_reply('WRONGTYPE ' .. shown(KEYS[5]) .. ' is a ' .. redis.call('TYPE', KEYS[5]).ok
    .. ', not a hash: no job of its topic is handed out until it is fixed')
end
if paused then
  redis.pcall('DEL', KEYS[6])
  return {'paused', PAUSED_RECHECK_MS, KEYS[6]}
end

-- Classic ids are global: an id pushed again under another topic, which is
-- paused, waits in that topic's flow pool (move.lua set it aside), and an
-- entry of it in this queue is stale like one whose id waits in the pool.
-- The names come from the bucket prefix "<prefix>job_bucket:" (the per-topic
-- layout's ids are per topic: never so). One string compare per job, and a
-- ZSCORE only for an entry of another topic.
local classic = string.match(ARGV[1], '^(.*)job_bucket:$')
local function set_aside(topic, id)
  if not classic or KEYS[1] == classic .. 'ready_queue:' .. topic then return false end
  return type(redis.pcall('ZSCORE', classic .. 'flow_pool:' .. topic, id)) == 'string'
end

while true do
  local id = redis.call('RPOP', KEYS[1])
  if not id then
    return false
  end
  local bucket = ARGV[1] .. id
  local job = redis.pcall('HMGET', bucket, 'topic', 'body', 'dead_reason', 'traceparent')
  if job.err or job[1] == '' or (not job[1] and job[2]) then
    local err = park(id)
    if err then return err end
  elseif job[1] then
    -- A key of the wrong type must not lose the id just popped: it goes
    -- back, and the error is returned.
    local waiting, held = redis.pcall('ZSCORE', KEYS[3], id), redis.pcall('ZSCORE', KEYS[4], id)
    if type(waiting) == 'table' or type(held) == 'table' then
      redis.call('RPUSH', KEYS[1], id)
      return type(waiting) == 'table' and waiting or held
    end
    if not (job[3] or waiting or held or set_aside(job[1], id)) then
      redis.call('DEL', bucket)
      return {id, job[1], job[2] or '', job[4] or ''}
    end
  end
end
