-- run.lua — the entry point: the call's keys and state, the op, flush().

local ANSWER_LIFE = 60000  -- ms: a node's kept answers in a shard live so long after its last '+'

-- The replies of a putmany's jobs, each put plainly (no refusal, move, replace or debounce),
-- from the shard's counter before it: its ids in a row, each due as its arguments say.
local function plain_puts(result, seq, now)
  local shards, shard, n = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
  for a = 5, 4 + 9 * n, 9 do
    seq = seq + 1
    local due = due_of(ARGV[a + 2] + 0, ARGV[a + 3], now)
    result[#result + 1] = {'ok', seq * shards + shard, due, 0}
  end
end

-- A call's answer as run() keeps it: packed whole (MessagePack), or for a putmany whose every
-- job went in plainly, 'P' and what plain_puts() needs to make the jobs' replies again from the
-- call's own arguments (packing 24 replies of four values cost Redis about 3,000 instructions a
-- put, as much as going through them in Lua).
local function keep(answer)
  local result = answer[1]
  if not plain_from or result[1] ~= 'ok' then return cmsgpack.pack(answer) end
  return 'P' .. cmsgpack.pack(result[2], plain_from, result[#result], answer[2])
end

-- The answer keep() kept, as the call first gave it.
local function kept_answer(kept)
  if string.byte(kept) ~= 80 then return cmsgpack.unpack(kept) end -- 'P'
  local now, seq, served, readied = cmsgpack.unpack(string.sub(kept, 2))
  local result = {'ok', now}
  plain_puts(result, seq, now)
  result[#result + 1] = served
  return {result, readied}
end

-- lost number...: what became of calls whose answers never reached the node (no answer within
-- its time: Redis stopped, swamped or cut off), each {'ran', <its reply>}, 'void' or 'unknown'.
-- A number not kept was not run, and is voided ('V' in the hash): the call, if it reaches Redis
-- later, runs nothing and answers {'void'}. With the hash gone (it expired: the node called
-- nothing here for a minute), nothing tells: 'unknown', and nothing is written. The node gives
-- back what a call that ran reserved for its waiters. A putmany kept in short answers {'ok',
-- served}: its replies would need its arguments. Not numbered: asked again, it answers the same.
ops.lost = function(keys)
  local out = {}
  local known = redis.call('EXISTS', keys[24]) == 1
  for i = 2, #ARGV do
    local kept = known and redis.call('HGET', keys[24], ARGV[i])
    if not known then
      out[#out + 1] = 'unknown'
    elseif not kept or kept == 'V' then
      if not kept then redis.call('HSET', keys[24], ARGV[i], 'V') end
      out[#out + 1] = 'void'
    elseif string.byte(kept) == 80 then -- 'P'
      out[#out + 1] = {'ran', {'ok', (select(3, cmsgpack.unpack(string.sub(kept, 2))))}}
    else
      out[#out + 1] = {'ran', cmsgpack.unpack(kept)[1]}
    end
  end
  return {'ok', out}
end

-- The shard of `keys` (shard_keys() in layout.cc, in that order) as the one a call works on,
-- with nothing of a shard before it.
local function enter(keys)
  base = string.gsub(keys[1], ':seq$', '')
  SEVENTS = base .. ':events'
  SEQ, J, A, T, R, B, KI, G, C, M, P, TUBES, OWNER, EPOCH, TI, TP = keys[1], keys[2], keys[3],
    keys[4], keys[5], keys[6], keys[7], keys[8], keys[9], keys[10], keys[11], keys[12], keys[13],
    keys[14], keys[15], keys[16]
  S, SM, ST = keys[17], keys[18], keys[19]
  F, FG, FW, FZ = keys[20], keys[21], keys[22], keys[23]
  flows, was_head, moved_to, fz_lead, gstates, gdirty = {}, {}, nil, nil, {}, {}
  shard_here = nil
  clock, clock_ms, quiet, leads = nil, nil, false, false
  forget_reads()
  begin_writes()
  plain_from = nil
end

-- For each shard named by its keys' base in argv[from], argv[from + 1]... (the call's keys are
-- its first shard's, all of them: the others' are their base with the same suffixes), in
-- order: the shard entered, and visit(its keys) run, until over() says the call's budget is
-- spent. {each shard's result; '-1' where the budget was spent first; '-2' where visit failed
-- (a shard this Redis does not serve)}.
local function across_shards(keys, argv, from, over, visit)
  local suffixes = {}
  for i, key in ipairs(keys) do suffixes[i] = string.sub(key, #base + 1) end
  local out = {}
  for i = from, #argv do
    if over() then
      out[#out + 1] = '-1'
    else
      local b, shard = argv[i], {}
      for n, suffix in ipairs(suffixes) do shard[n] = b .. suffix end
      enter(shard)
      local ok, r = pcall(visit, shard)
      out[#out + 1] = ok and r or '-2'
    end
  end
  return out
end

-- The ops that each may run (they write nothing: a group's listing or count, not its cancel),
-- and for each the rows of a shard's reply, the work each's budget counts. A walk of the
-- shard's timers (a tube's delayed jobs) counts the timers it visited.
local READS = {
  stats = function(r) return #r - 1 end, -- a row per tube
  peek_next = function() return math.max(1, walked) end,
  kickable = function(r) return math.max(#r[2], walked) end,
  group = function(r) return math.floor((#r - 1) / 2) end -- an id and a record per job; a count none
}

-- each rows k op arg... base...: the read `op` with its k arguments in each shard named by its
-- keys' base ("dq:{s}"), in order, in one call through the registration that allows other
-- slots' keys, until the shards read have cost `rows` (a shard costs its reply's rows and one):
-- each call holds Redis about as long whatever the shards hold. The call's keys are its first
-- shard's, all of them: the others' are their base with the same suffixes. Replies {'ok', {each
-- shard's reply; '-1' where the rows were spent first; '-2' where it failed (a shard this Redis
-- does not serve, or whose walk of its timers would visit more than `rows`, or than a kick's
-- count if larger)}}: its node asks the '-1's in its next call, the '-2's alone.
ops.each = function(keys)
  local argv, rows, k = ARGV, tonumber(ARGV[2]), tonumber(ARGV[3])
  local inner = {}
  for i = 4, 4 + k do inner[#inner + 1] = argv[i] end
  local count = READS[inner[1]]
  if not count or (inner[1] == 'group' and inner[4] ~= '0' and inner[4] ~= 'n') then
    return redis.error_reply('ERR delayq: each runs reads only, not ' .. tostring(inner[1]))
  end
  local handler, spent = ops[inner[1]], 0
  ARGV = inner
  -- A shard's walk may visit the call's rows, or as many timers as a kick wants if more.
  walk_limit = math.max(rows, inner[1] == 'kickable' and tonumber(inner[4]) or 0)
  local out = across_shards(keys, argv, 5 + k, function() return spent >= rows end,
    function(shard)
      walked = 0
      local r = handler(shard)
      if type(r) ~= 'table' or r.err then error('failed') end
      spent = spent + count(r) + 1
      return r
    end)
  ARGV, walk_limit = argv, nil
  return {'ok', out}
end

-- tidy_all after_ms budget base...: in each shard named by its keys' base (the call's keys are
-- the first one's, as each's), forgets the tubes that have held no job there, and had no
-- settings there (pause, max_attempts, flow control), from one look to another at least
-- after_ms later (0: at once) with no job put meanwhile: their names leave the set of tubes,
-- and their counts (jobs put, deletes, timeouts) go on in the shard's own (the fields of tube
-- '', which stats reports), so the server's totals never go down. A tube that has a job again
-- starts its counts anew, as a beanstalkd tube made again does. So a tube made per customer
-- or per request leaves nothing behind an hour after its last job. A look goes through the
-- shard's set of tubes a page at a time (SSCAN: about 16 tubes, or all of a set of up to 128),
-- its cursor kept in field '\0s'; the call stops once it has looked at `budget` tubes, so that
-- it holds Redis a few milliseconds at most whatever the shards hold. Replies {'ok', {each
-- shard's tubes forgotten; '-1' where the call stopped before the shard's look was through (its
-- node asks the shard again, in its next call, until it is)}; '-2' where it failed}.
ops.tidy_all = function(keys)
  local now, after, budget, spent = now_ms(), tonumber(ARGV[2]), tonumber(ARGV[3]), 0
  -- A tube seen empty: its mark is "<when>:<jobs put by then>".
  local function look_at(tube)
    local mark = tube .. '\0e'
    if holds_jobs(tube) or redis.call('HEXISTS', M, tube) == 1 or
        redis.call('HEXISTS', P, tube) == 1 or redis.call('HEXISTS', F, tube) == 1 then
      redis.call('HDEL', C, mark)
      return 0
    end
    local fields = {tube .. '\0n', tube .. '\0x', tube .. '\0o'}
    local c = redis.call('HMGET', C, mark, unpack(fields))
    local put = c[2] or '0'
    local since, put_then = string.match(c[1] or '', '^(%d+):(%d+)$')
    if after > 0 and (not since or put_then ~= put) then
      redis.call('HSET', C, mark, string.format('%d', now) .. ':' .. put)
      return 0
    end
    if after > 0 and now - tonumber(since) < after then return 0 end
    for i, total in ipairs({'\0n', '\0x', '\0o'}) do
      local n = tonumber(c[i + 1] or '0')
      if n ~= 0 then redis.call('HINCRBY', C, total, n) end
    end
    redis.call('HDEL', C, mark, tube .. '\0v', tube .. '\0d', tube .. '\0u', unpack(fields))
    redis.call('SREM', TUBES, tube)
    return 1
  end
  local function tidy()
    local cursor, forgotten = redis.call('HGET', C, '\0s') or '0', 0
    repeat
      local page = redis.call('SSCAN', TUBES, cursor, 'COUNT', 16)
      cursor = page[1]
      spent = spent + #page[2] + 1
      for _, tube in ipairs(page[2]) do forgotten = forgotten + look_at(tube) end
    until cursor == '0' or spent >= budget
    if cursor == '0' then
      redis.call('HDEL', C, '\0s')
      return forgotten
    end
    redis.call('HSET', C, '\0s', cursor)
    return '-1'
  end
  return {'ok', across_shards(keys, ARGV, 4, function() return spent >= budget end, tidy)}
end

local function run(keys, args)
  ARGV = args
  caller = table.remove(ARGV)
  local tag = table.remove(ARGV)
  enter(keys)
  local handler = ops[args[1]]
  if not handler then
    return redis.error_reply('ERR delayq: unknown operation ' .. tostring(args[1]))
  end
  -- A call that changes something comes numbered, "[+]<number>[,<number>...]", with the key of
  -- its node's kept answers in this shard (keys[24]): the numbers after the first are answers
  -- the node has, forgotten now; a call whose number is kept was run before and lost its
  -- answer on the way back, and gets that answer again, nothing run twice. '+': the hash is
  -- kept for another ANSWER_LIFE (the node says so every 10 s or less, while it calls).
  local number, refresh, forget
  if tag ~= '' then
    refresh = string.byte(tag) == 43 -- '+'
    if refresh then tag = string.sub(tag, 2) end
    forget = {}
    for n in string.gmatch(tag, '[^,]+') do
      if number then forget[#forget + 1] = n else number = n end
    end
    local kept = redis.call('HGET', keys[24], number)
    if kept == 'V' then return {{'void'}, {}} end -- voided by `lost`
    if kept then return kept_answer(kept) end
  end
  walk_limit = nil -- each's own, also after a call that failed halfway through an each
  local result = handler(keys)
  -- A lookup by key of a tube that lives in another shard (flow.lua): the node asks there.
  if moved_to then result = {'moved', string.format('%d', moved_to)} end
  flush()
  local answer = {result, readied}
  if number then
    -- Kept until the node says it has it, or for a minute (a node that died). Set before the
    -- others go, so that the hash never empties (which would delete it, and its life with it).
    redis.call('HSET', keys[24], number, keep(answer))
    if #forget > 0 then redis.call('HDEL', keys[24], unpack(forget)) end
    if refresh then redis.call('PEXPIRE', keys[24], ANSWER_LIFE) end
  end
  return answer
end
