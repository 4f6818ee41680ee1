-- ack: a reserved job is done; delete it.
--
-- KEYS[1]  reserved    ZSET  <prefix>reserved
-- KEYS[2]  job bucket  HASH  <prefix>job_bucket:<id>
-- KEYS[3]  job pool    ZSET  <prefix>job_pool
-- KEYS[4]  outcome counts  HASH  <prefix>outcomes (an ack adds 1 to its
--          field "acked:<topic>", the topic the bucket names, which the
--          server exports)
-- ARGV[1]  job id
-- ARGV[2]  receipt from reserve, or "" for whichever reservation is current
--
-- Returns 1 when the reservation was held and the job is deleted, 0 when it
-- was not (unknown id, already acked, or expired and handed out again).
--
-- A reservation is held while its id is in the reserved set and its bucket
-- carries its receipt, and the id is not waiting in the pool (a 1.x-style
-- push of the same id keeps the old receipt field: the reservation is stale,
-- and acking it would delete the newer job). An ack after the deadline still counts as long as the
-- server has not yet put the job back: nobody else holds it then.
local job = redis.pcall('HMGET', KEYS[2], 'receipt', 'topic')
local receipt = not job.err and job[1]
if type(receipt) ~= 'string' or (ARGV[2] ~= '' and receipt ~= ARGV[2])
    or not redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
-- A count only, last and under pcall: a key of the wrong type skips it.
if KEYS[4] and job[2] then redis.pcall('HINCRBY', KEYS[4], 'acked:' .. job[2], 1) end
return 1
