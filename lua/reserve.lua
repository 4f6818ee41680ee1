-- reserve: hand out the next ready job of one topic and keep it reserved
-- for ttr (the at-least-once counterpart of pop.lua).
--
-- KEYS[1]  ready queue      LIST    <prefix>ready_queue:<topic>
-- KEYS[2]  reserved         ZSET    <prefix>reserved (score: deadline, Unix ms)
-- KEYS[3]  malformed list   LIST    <prefix>malformed
-- KEYS[4]  receipt counter  STRING  <prefix>receipt_seq
-- KEYS[5]  job pool         ZSET    <prefix>job_pool
-- KEYS[6]  outcome counts   HASH    <prefix>outcomes (each batch-mode ack
--          adds 1 to "acked:<topic>", as ack.lua does)
-- KEYS[7]  flow control     HASH    <prefix>flow:<topic> (field "paused")
-- KEYS[8]  flow gate        LIST    <prefix>flow_gate:<topic>
-- ARGV[1]  bucket key prefix, "<prefix>job_bucket:"
-- ARGV[2]  ttr in milliseconds, integer >= 1
-- ARGV[3]  "" for one job, or batch mode: the most jobs to reserve, integer
--          0..1000
-- ARGV[4..] batch mode: pairs (id, receipt) to ack first, as ack.lua
--          (receipt "" = whichever reservation is current); none for one job
-- last     wake channel "<prefix>wake", or "": none; always the last value
--          (one job: ARGV[4]; batch: after the pairs), so a call has 4 ARGV
--          for one job, 4 + 2 per pair in batch mode. "<deadline> <topic>" is
--          published when the deadline comes before the reserved set's
--          earliest (or the set was empty), so the server expires it on time.
--
-- Returns {id, topic, body, attempts, max_attempts, receipt, deadline,
-- traceparent}, or nil when the queue holds no live job. deadline is "s.mmm"
-- (Redis's clock); traceparent as pop.lua returns it ("" when absent).
-- Batch mode returns {acks, jobs}: acks one 1|0 per pair, in order (1: the
-- reservation was held and the job is deleted); jobs 0..n replies as above,
-- in ready order. A worker acks what it finished and takes its next jobs in
-- one round trip instead of two per job.
-- While the topic is paused nothing is taken: one job mode returns pop.lua's
-- wait instruction {"paused", PAUSED_RECHECK_MS, gate}; batch mode acks as
-- usual (a worker finishes what it holds) and returns {acks, {}, that
-- instruction}. A flow hash of the wrong type fails the call before any
-- write, as a ready queue of the wrong type does (acks alone still pass). A batch reads the clock once, takes
-- its receipts with one INCRBY and enters the reserved set with one ZADD (all
-- its jobs share one deadline); its acks end with one ZREM and one DEL.
--
-- The id leaves the ready queue and enters the reserved set, scored by its
-- deadline, in one step: no other consumer can get it until ack, release or
-- bury ends the reservation, or the server's expiry (release.lua) puts it
-- back after the deadline. attempts counts reservations. The receipt is
-- unique per reservation, so a worker whose reservation expired cannot end
-- the next worker's. Retry settings the pusher left out are not written:
-- the bucket gains only attempts and receipt (a smaller write, and smaller
-- reads at ack: 12-17 % less Redis time per reserve + ack), and release.lua
-- applies the same defaults (PROTOCOL.md, "The job bucket"). The bucket loses
-- its TTL: a job in at-least-once hands is kept until it is acked or purged.
-- Skipped, stale and parked ids are handled as in pop.lua.
if redis.replicate_commands then pcall(redis.replicate_commands) end

-- The reply's max_attempts when the pusher left it out (release.lua's
-- DEFAULT_MAX_ATTEMPTS; a conformance test holds the two together).
local DEFAULT_MAX_ATTEMPTS = '25'

local function count(v)
  return v == false or (type(v) == 'string' and string.match(v, '^%d+$') ~= nil)
end

-- Parks a malformed id just popped (a failed LPUSH writes nothing): on the
-- malformed list, or when that holds the wrong type back in the pool, due
-- now (ZADD NX), where the server holds it and names the key (PROTOCOL.md,
-- "Operations": an id popped is never lost to a key of the wrong type).
-- Returns the error when the pool refused it too; the caller puts it back.
local function park(id)
  if type(redis.pcall('LPUSH', KEYS[3], id)) == 'number' then return nil end
  local t = redis.call('TIME')
  local back = redis.pcall('ZADD', KEYS[5], 'NX', t[1] .. '.' .. string.format('%03d', math.floor(t[2] / 1000)), id)
  if type(back) == 'table' then return back end
end

-- Reads the bucket of an id just popped off the ready queue. Returns its
-- job when the bucket holds one; nil when it was skipped (bucket gone),
-- parked (malformed) or is dead (a stale entry, dropped); nil and the
-- error when it could not be parked. The caller still checks the id is
-- neither waiting in the pool nor reserved.
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

local function read_bucket(id)
  local bucket = ARGV[1] .. id
  local f = redis.pcall('HMGET', bucket, 'topic', 'body', 'attempts', 'max_attempts', 'backoff', 'backoff_ms',
    'backoff_max_ms', 'dead_reason', 'traceparent')
  if f.err or f[1] == '' or (not f[1] and f[2])
      or (f[1] and not (count(f[3]) and count(f[4]) and count(f[6]) and count(f[7])
        and (not f[5] or f[5] == 'fixed' or f[5] == 'exponential'))) then
    return nil, park(id)
  end
  if not f[1] or f[8] or set_aside(f[1], id) then return nil end
  return {id = id, bucket = bucket, f = f}
end

-- Records a live job's reservation in its bucket (attempts and receipt)
-- and gives its reply.
local function write(job, receipt, deadline)
  local f = job.f
  local attempts = tonumber(f[3] or '0') + 1
  redis.call('HSET', job.bucket, 'attempts', attempts, 'receipt', receipt)
  redis.call('PERSIST', job.bucket)
  return {job.id, f[1], f[2] or '', attempts, tonumber(f[4] or DEFAULT_MAX_ATTEMPTS), receipt, deadline, f[9] or ''}
end

-- (pop.lua and take.lua say the same; a conformance test holds them.)
local PAUSED_RECHECK_MS = 5000

-- A key for an error message: bytes outside printable ASCII as \xNN, since
-- clients read an error's text as UTF-8.
local function shown(s)
  return (string.gsub(s, '[^\32-\126]', function(c) return string.format('\\x%02x', string.byte(c)) end))
end

-- The topic's flow control, read before anything is written: the wait
-- instruction when it is paused, else nil; and an error when its key is of
-- the wrong type.
local function flow_wait()
  local paused = redis.pcall('HGET', KEYS[7], 'paused')
  if type(paused) == 'table' then
    return nil, redis.error_reply('WRONGTYPE ' .. shown(KEYS[7]) .. ' is a ' .. redis.call('TYPE', KEYS[7]).ok
      .. ', not a hash: no job of its topic is handed out until it is fixed')
  end
  if paused then return {'paused', PAUSED_RECHECK_MS, KEYS[8]} end
end

-- The wake channel (see the header), or "".
local wake = ''
if (ARGV[3] or '') == '' then
  wake = ARGV[4] or ''
elseif (#ARGV - 3) % 2 == 1 then
  wake = ARGV[#ARGV]
end

-- The reserved set's earliest deadline (Unix ms) before a ZADD, when there
-- is a channel to announce on; false when the set is empty.
local function head_before()
  if wake == '' then return nil end
  local head = redis.pcall('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if type(head) ~= 'table' or head.err then return nil end
  return tonumber(head[2]) or false
end

-- Announces a deadline written at `score` (Unix ms) for `topic` when it
-- comes before `head` (or the set was empty: head false).
local function announce(head, score, deadline, topic)
  if head ~= nil and (head == false or tonumber(score) < head) then
    redis.pcall('PUBLISH', wake, deadline .. ' ' .. topic)
  end
end

-- The deadline now + ttr twice: as the reserved set's score (Unix ms, an
-- integer) and as the reply's "s.mmm".
local function deadline_now()
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  return string.format('%d', ms), string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
end

local function reserve_one()
  while true do
    local id = redis.call('RPOP', KEYS[1])
    if not id then
      return false
    end
    local job, err = read_bucket(id)
    if err then
      redis.call('RPUSH', KEYS[1], id)
      return nil, err
    end
    local waiting, held = false, false
    if job then
      waiting, held = redis.pcall('ZSCORE', KEYS[5], id), redis.pcall('ZSCORE', KEYS[2], id)
      if type(waiting) == 'table' or type(held) == 'table' then
        redis.call('RPUSH', KEYS[1], id)
        return nil, type(waiting) == 'table' and waiting or held
      end
    end
    if job and not (waiting or held) then -- else stale: dropped
      -- The two calls that can fail (keys of the wrong type) come before any
      -- write that cannot be undone; on failure the id goes back where it was.
      local seq = redis.pcall('INCR', KEYS[4])
      local score, deadline = deadline_now()
      local head = type(seq) == 'number' and head_before()
      local added = type(seq) == 'number' and redis.pcall('ZADD', KEYS[2], score, id)
      if type(added) ~= 'number' then
        redis.call('RPUSH', KEYS[1], id)
        return nil, type(seq) == 'number' and added or seq
      end
      announce(head, score, deadline, job.f[1])
      return write(job, tostring(seq), deadline)
    end
  end
end

-- ack.lua's rule: held while the id is reserved, its bucket carries the
-- receipt, and the id does not wait in the pool (a stale reservation).
local function held(id, receipt)
  local current = redis.pcall('HGET', ARGV[1] .. id, 'receipt')
  return type(current) == 'string' and (receipt == '' or current == receipt)
    and redis.call('ZSCORE', KEYS[2], id) and not redis.call('ZSCORE', KEYS[5], id)
end

if (ARGV[3] or '') == '' then
  local paused, bad = flow_wait()
  if bad then return bad end
  if paused then
    redis.pcall('DEL', KEYS[8])
    return paused
  end
  local job, err = reserve_one()
  if err then return err end
  return job
end

-- Batch mode. The acks first, by ack.lua's rule, with the reserved and pool
-- lookups of all pairs done in one ZMSCORE each; then ended together (one
-- ZREM, one DEL). Per-call costs, not per-job work, dominate a script this
-- size, so the batch pays them once where it can.
local acks, done_ids, done_buckets, acked = {}, {}, {}, {}
local pair_ids = {}
for i = 4, #ARGV - 1, 2 do pair_ids[#pair_ids + 1] = ARGV[i] end
-- The ready queue is checked before the acks write anything: a queue of the
-- wrong type fails the call whole, not after its acks.
local paused
if (tonumber(ARGV[3]) or 0) > 0 then
  local bad
  paused, bad = flow_wait()
  if bad then return bad end
  if paused then redis.pcall('DEL', KEYS[8]) end
end
if #pair_ids > 0 and (tonumber(ARGV[3]) or 0) > 0 then
  local len = redis.pcall('LLEN', KEYS[1])
  if type(len) == 'table' then return len end
end
if #pair_ids > 0 then
  local held_at = redis.call('ZMSCORE', KEYS[2], unpack(pair_ids))
  local waiting = redis.call('ZMSCORE', KEYS[5], unpack(pair_ids))
  for k, id in ipairs(pair_ids) do
    local bucket, receipt = ARGV[1] .. id, ARGV[3 + 2 * k]
    local current = held_at[k] and not waiting[k] and not done_buckets[bucket]
      and redis.pcall('HMGET', bucket, 'receipt', 'topic')
    if current and not current.err and current[1] and (receipt == '' or current[1] == receipt) then
      acks[k] = 1
      done_ids[#done_ids + 1] = id
      done_buckets[bucket] = true
      if current[2] then acked[current[2]] = (acked[current[2]] or 0) + 1 end
    else
      acks[k] = 0
    end
  end
end
if #done_ids > 0 then
  redis.call('ZREM', KEYS[2], unpack(done_ids))
  for i = 1, #done_ids do done_ids[i] = ARGV[1] .. done_ids[i] end
  redis.call('DEL', unpack(done_ids))
  -- Counts only, under pcall: a key of the wrong type skips them.
  for topic, n in pairs(acked) do redis.pcall('HINCRBY', KEYS[6], 'acked:' .. topic, n) end
end

-- Then up to n jobs, with one clock reading and one receipt range for the
-- batch; per job only its bucket's reads and writes. The stale checks
-- (waiting in the pool, already reserved) are one ZMSCORE each per pop.
local want = math.min(tonumber(ARGV[3]) or 0, 1000)
local jobs = {}
if paused then return {acks, jobs, paused} end
if want > 0 then
  local score, deadline = deadline_now()
  local live, seen = {}, {}
  while #live < want do
    local ids = redis.call('RPOP', KEYS[1], want - #live)
    if not ids then break end
    local waiting = redis.pcall('ZMSCORE', KEYS[5], unpack(ids))
    local held_at = not waiting.err and redis.pcall('ZMSCORE', KEYS[2], unpack(ids))
    local err = waiting.err and waiting or held_at.err and held_at
    if err then
      -- A key of the wrong type: the ids go back where they were, and the
      -- jobs taken so far are returned (the error comes again next call).
      for j = #ids, 1, -1 do redis.call('RPUSH', KEYS[1], ids[j]) end
      if #live == 0 and #acks == 0 then return err end
      break
    end
    for k, id in ipairs(ids) do
      -- Stale: waiting again, reserved already, or the same id twice in
      -- this batch (the second entry would find it reserved by the first).
      -- (read_bucket's parking cannot fail here: the pool answered ZMSCORE.)
      local job = not (waiting[k] or held_at[k] or seen[id]) and read_bucket(id)
      if job then
        seen[id] = true
        live[#live + 1] = job
      end
    end
  end
  if #live > 0 then
    local last = redis.pcall('INCRBY', KEYS[4], #live)
    local members = {}
    for i, job in ipairs(live) do
      members[2 * i - 1], members[2 * i] = score, job.id
    end
    local head = type(last) == 'number' and head_before()
    local added = type(last) == 'number' and redis.pcall('ZADD', KEYS[2], unpack(members))
    if type(added) ~= 'number' then
      for i = #live, 1, -1 do redis.call('RPUSH', KEYS[1], live[i].id) end
      if #acks > 0 then return {acks, {}} end
      return type(last) == 'number' and added or last
    end
    announce(head, score, deadline, live[1].f[1])
    for i, job in ipairs(live) do
      jobs[i] = write(job, tostring(last - #live + i), deadline)
    end
  end
end
return {acks, jobs}
