-- index: set topics' times in the per-topic layout's index, as the server
-- does after draining them (PROTOCOL.md, "The per-topic layout").
--
-- KEYS[1]  index  ZSET  <prefix>due
-- ARGV[1..] pairs: topic, its next time in Unix seconds (a due time or a
--           reservation deadline), or "" (the topic leaves the index)
--
-- Returns the number of topics written.
--
-- Each topic's entry is removed, then added again: a removal adds no
-- memory, and Redis refuses a write for maxmemory only as a script's first,
-- so the index keeps up with the moves when Redis is out of memory. (A
-- plain ZADD would be refused there: the drained topics' passed times would
-- stay, and the server would drain them for nothing, again and again.)
if redis.replicate_commands then pcall(redis.replicate_commands) end

for i = 1, #ARGV - 1, 2 do
  redis.call('ZREM', KEYS[1], ARGV[i])
  if ARGV[i + 1] ~= '' then
    redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  end
end
return math.floor(#ARGV / 2)
