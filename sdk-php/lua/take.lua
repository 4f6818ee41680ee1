-- take: fetch and delete the bucket of an id the caller has already popped
-- with BRPOP (the second half of delayer's BPOP; BRPOP cannot run in a script).
--
-- KEYS[1]  job bucket      HASH  <prefix>job_bucket:<id>
-- KEYS[2]  malformed list  LIST  <prefix>malformed
-- KEYS[3]  job pool        ZSET  <prefix>job_pool
-- KEYS[4]  reserved        ZSET  <prefix>reserved
-- KEYS[5]  ready queue     LIST  <prefix>ready_queue:<topic> (BRPOP's)
-- KEYS[6]  flow control    HASH  <prefix>flow:<topic> (field "paused")
-- KEYS[7]  flow gate       LIST  <prefix>flow_gate:<topic>
-- ARGV[1]  job id
--
-- Returns {id, topic, body, traceparent} (as pop.lua), or nil when there is
-- no live job under the id;
-- the caller then waits for the next id. While the topic is paused the id
-- goes back to the right end of the ready queue, where BRPOP took it from,
-- and the reply is pop.lua's wait instruction {"paused", PAUSED_RECHECK_MS,
-- gate}. The gate's DEL is the script's first write, so Redis, out of
-- memory, does not refuse the RPUSH that follows (its maxmemory check looks
-- at a script's first write). A flow hash of the wrong type puts the id
-- back too, and the error names the key. An id whose bucket has no topic, or
-- is not a hash, is parked on the malformed list (bucket kept), not lost.
-- A stale entry (the id has been pushed again and waits in the pool, or is
-- reserved, or dead) gives nil as well: see pop.lua.
-- Guards (PROTOCOL.md, "Operations"): the id BRPOP took is never dropped
-- for a key of the wrong type. A malformed list of the wrong type sends it
-- back to the pool, due now (ZADD NX), where the server holds it and names
-- the key; should the pool refuse it too (a key of the wrong type, or Redis
-- out of memory), the error returned names the id.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- A key or id for an error message: bytes outside printable ASCII as \xNN,
-- since clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end
-- Parks the id on the malformed list, else back in the pool; returns an
-- error reply when neither took it.
local function park(why)
  local parked = redis.pcall('LPUSH', KEYS[2], ARGV[1])
  if type(parked) == 'number' then return nil end
  local t = redis.call('TIME')
  local back = redis.pcall('ZADD', KEYS[3], 'NX', t[1] .. '.' .. string.format('%03d', math.floor(t[2] / 1000)), ARGV[1])
  if type(back) == 'number' then return why end
  local err = parked.err
  return redis.error_reply(err .. ' (take.lua: id ' .. shown(ARGV[1]) .. ' could not be parked: its bucket is kept)')
end

-- (pop.lua and reserve.lua say the same; a conformance test holds them.)
local PAUSED_RECHECK_MS = 5000
local paused = redis.pcall('HGET', KEYS[6], 'paused')
if paused then
  redis.pcall('DEL', KEYS[7])
  local back = redis.pcall('RPUSH', KEYS[5], ARGV[1])
  if type(back) == 'table' then
    local err = park(back)
    if err then return err end
  end
  if type(paused) == 'table' then
    return redis.error_reply('WRONGTYPE ' .. shown(KEYS[6]) .. ' is a ' .. redis.call('TYPE', KEYS[6]).ok
      .. ', not a hash: no job of its topic is handed out until it is fixed')
  end
  return {'paused', PAUSED_RECHECK_MS, KEYS[7]}
end

-- Classic ids are global: an id pushed again under another topic, which is
-- paused, waits in that topic's flow pool (move.lua set it aside), and an
-- entry of it in this queue is stale like one whose id waits in the pool.
-- The names come from the bucket prefix "<prefix>job_bucket:" (the per-topic
-- layout's ids are per topic: never so). One string compare per job, and a
-- ZSCORE only for an entry of another topic.
local classic = string.match(string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[1]), '^(.*)job_bucket:$')
local function set_aside(topic, id)
  if not classic or KEYS[5] == classic .. 'ready_queue:' .. topic then return false end
  return type(redis.pcall('ZSCORE', classic .. 'flow_pool:' .. topic, id)) == 'string'
end

local job = redis.pcall('HMGET', KEYS[1], 'topic', 'body', 'dead_reason', 'traceparent')
if job.err or job[1] == '' or (not job[1] and job[2]) then
  return park(false) or false
end
if not job[1] then
  return false
end
-- The caller's BRPOP has taken the id already: on a key of the wrong type
-- it is parked (or sent back to the pool), not lost, and the error returned.
local waiting, held = redis.pcall('ZSCORE', KEYS[3], ARGV[1]), redis.pcall('ZSCORE', KEYS[4], ARGV[1])
if type(waiting) == 'table' or type(held) == 'table' then
  local err = type(waiting) == 'table' and waiting or held
  return park(err) or err
end
if job[3] or waiting or held or set_aside(job[1], ARGV[1]) then
  return false
end
redis.call('DEL', KEYS[1])
return {ARGV[1], job[1], job[2] or '', job[4] or ''}
