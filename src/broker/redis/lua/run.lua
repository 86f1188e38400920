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
  begin_writes()
  plain_from = nil
end

-- The ops that each may run: they read and write nothing.
local READS = {stats = true, peek_next = true}

-- each k op arg... base...: the read `op` with its k arguments in each shard named by its keys'
-- base ("dq:{s}"), in one call through the registration that allows other slots' keys. The
-- call's keys are its first shard's, all of them: the others' are their base with the same
-- suffixes. Replies {'ok', {each shard's reply, or '-2' where it failed (a shard this Redis
-- does not serve): the node asks that shard alone}}.
ops.each = function(keys)
  local argv, k, first = ARGV, tonumber(ARGV[2]), base
  local inner = {}
  for i = 3, 3 + k do inner[#inner + 1] = argv[i] end
  local handler = READS[inner[1]] and ops[inner[1]]
  if not handler then
    return redis.error_reply('ERR delayq: each runs reads only, not ' .. tostring(inner[1]))
  end
  local suffixes = {}
  for i = 1, 23 do suffixes[i] = string.sub(keys[i], #first + 1) end
  local out = {}
  ARGV = inner
  for i = 4 + k, #argv do
    local b, shard = argv[i], {}
    for n, suffix in ipairs(suffixes) do shard[n] = b .. suffix end
    enter(shard)
    local ok, r = pcall(handler, shard)
    out[#out + 1] = ok and r or '-2'
  end
  ARGV = argv
  return {'ok', out}
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
