-- reserve: hand out the next ready job of one topic and keep it reserved
-- for ttr (the at-least-once counterpart of pop.lua).
--
-- KEYS[1]  ready queue      LIST    <prefix>ready_queue:<topic>
-- KEYS[2]  reserved         ZSET    <prefix>reserved
-- KEYS[3]  malformed list   LIST    <prefix>malformed
-- KEYS[4]  receipt counter  STRING  <prefix>receipt_seq
-- KEYS[5]  job pool         ZSET    <prefix>job_pool
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[2]  ttr in milliseconds, integer >= 1
-- ARGV[3]  batch mode (optional): the most jobs to reserve, integer 0..1000
-- ARGV[4..] batch mode (optional): pairs (id, receipt) to ack first, as ack.lua
--          (receipt "" = whichever reservation is current)
--
-- Returns {id, topic, body, attempts, max_attempts, receipt, deadline}, or
-- nil when the queue holds no live job. deadline is "s.mmm" (Redis's clock).
-- Batch mode returns {acks, jobs}: acks one 1|0 per pair, in order (1: the
-- reservation was held and the job is deleted); jobs 0..n replies as above,
-- in ready order. A worker acks what it finished and takes its next jobs in
-- one round trip instead of two per job.
--
-- The id leaves the ready queue and enters the reserved set, scored by its
-- deadline, in one step: no other consumer can get it until ack, release or
-- bury ends the reservation, or the server's expiry (release.lua) puts it
-- back after the deadline. attempts counts reservations. The receipt is
-- unique per reservation, so a worker whose reservation expired cannot end
-- the next worker's. Retry settings the pusher left out are written here,
-- once, so every later step reads them from the bucket. The bucket loses its
-- TTL: a job in at-least-once hands is kept until it is acked or purged.
-- Skipped, stale and parked ids are handled as in pop.lua.
if redis.replicate_commands then pcall(redis.replicate_commands) end

local DEFAULT_MAX_ATTEMPTS, DEFAULT_BACKOFF = '25', 'exponential'
local DEFAULT_BACKOFF_MS, DEFAULT_BACKOFF_MAX_MS = '1000', '3600000'

local function count(v)
  return v == false or (type(v) == 'string' and string.match(v, '^%d+$') ~= nil)
end

local function reserve_one()
  while true do
    local id = redis.call('RPOP', KEYS[1])
    if not id then
      return false
    end
    local bucket = ARGV[1] .. id
    local job = redis.pcall('HMGET', bucket, 'topic', 'body', 'attempts', 'max_attempts', 'backoff', 'backoff_ms',
      'backoff_max_ms', 'dead_reason')
    local live = false
    if job.err or job[1] == '' or (not job[1] and job[2])
        or (job[1] and not (count(job[3]) and count(job[4]) and count(job[6]) and count(job[7])
          and (not job[5] or job[5] == 'fixed' or job[5] == 'exponential'))) then
      redis.call('LPUSH', KEYS[3], id)
    elseif job[1] then
      -- Stale-entry checks; a key of the wrong type must not lose the id
      -- just popped: it goes back, and the error is returned.
      local waiting, held = redis.pcall('ZSCORE', KEYS[5], id), redis.pcall('ZSCORE', KEYS[2], id)
      if type(waiting) == 'table' or type(held) == 'table' then
        redis.call('RPUSH', KEYS[1], id)
        return nil, type(waiting) == 'table' and waiting or held
      end
      live = not (job[8] or waiting or held) -- else stale: dropped, try the next
    end
    if live then
      -- The two calls that can fail (keys of the wrong type) come before any
      -- write that cannot be undone; on failure the id goes back where it was.
      local seq = redis.pcall('INCR', KEYS[4])
      local t = redis.call('TIME')
      local deadline_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
      local deadline = string.format('%d.%03d', math.floor(deadline_ms / 1000), deadline_ms % 1000)
      local added = type(seq) == 'number' and redis.pcall('ZADD', KEYS[2], deadline, id)
      if type(added) ~= 'number' then
        redis.call('RPUSH', KEYS[1], id)
        return nil, type(seq) == 'number' and added or seq
      end
      local attempts = tonumber(job[3] or '0') + 1
      local max_attempts = job[4] or DEFAULT_MAX_ATTEMPTS
      redis.call('HSET', bucket, 'attempts', attempts, 'receipt', seq, 'max_attempts', max_attempts,
        'backoff', job[5] or DEFAULT_BACKOFF, 'backoff_ms', job[6] or DEFAULT_BACKOFF_MS,
        'backoff_max_ms', job[7] or DEFAULT_BACKOFF_MAX_MS)
      redis.call('PERSIST', bucket)
      return {id, job[1], job[2] or '', attempts, tonumber(max_attempts), tostring(seq), deadline}
    end
  end
end

-- ack.lua's rule: held while the id is reserved, its bucket carries the
-- receipt, and the id does not wait in the pool (a stale reservation).
local function ack(id, receipt)
  local bucket = ARGV[1] .. id
  local current = redis.pcall('HGET', bucket, 'receipt')
  if type(current) ~= 'string' or (receipt ~= '' and current ~= receipt)
      or not redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[5], id) then
    return 0
  end
  redis.call('ZREM', KEYS[2], id)
  redis.call('DEL', bucket)
  return 1
end

if ARGV[3] == nil then
  local job, err = reserve_one()
  if err then return err end
  return job
end

local acks, jobs = {}, {}
for i = 4, #ARGV - 1, 2 do
  acks[#acks + 1] = ack(ARGV[i], ARGV[i + 1])
end
for _ = 1, math.min(tonumber(ARGV[3]) or 0, 1000) do
  local job, err = reserve_one()
  -- After an ack or a reservation, an error must not hide them: the caller
  -- gets what was done, and the error again on its next call.
  if err and #jobs == 0 and #acks == 0 then return err end
  if not job then break end
  jobs[#jobs + 1] = job
end
return {acks, jobs}
