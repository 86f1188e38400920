-- ops.lua — the operations, ops.<name> each, with its arguments and reply. Only what must run
-- inside Redis is here (atomic on one shard, on Redis's clock: due times, TTRs, firing); a put's
-- checks and limits run in the node first, as in the local broker (broker/put_rules.h).

local ops = {}

-- One put, its 9 arguments from ARGV[a]: tube pri delay_or_at absolute replace key group
-- attachment tail, where tail is the new record after its times as the node packs it (the TTR,
-- five zero counters, the tube, key and group, no holder, then the body); seq is the job's number
-- in the shard, and its id seq * shards + shard. replace is '0', '1', or for a debounce
-- 'd<debounce ms>:<max_wait ms, or nothing>'. Replies {'ok', id, due, replaced id or 0}
-- (integers), or {'debounced', id, due, {first put, reserves, timeouts, releases, buries,
-- kicks}} (a pending holder took the put, keeping its id, its first put and its counters), or
-- {'exists', <reply() of the job holding the key>}, or
-- {'conflict', why}.
-- (A numeric argument is read as ARGV[i] + 0: tonumber() would convert the string twice.)
local function put_one(a, now, seq, shards, shard)
  local tube, key, group = ARGV[a], ARGV[a + 5], ARGV[a + 6]
  local home = flow_elsewhere(tube)
  if home then
    plain_from = nil
    return {'moved', string.format('%d', home)}
  end
  local replace = ARGV[a + 4]
  local replaced, kept = 0, nil
  local debounce, max_wait
  if #replace > 1 then
    plain_from = nil
    local colon = string.find(replace, ':', 2, true)
    debounce = tonumber(string.sub(replace, 2, colon - 1))
    max_wait = tonumber(string.sub(replace, colon + 1))
  end
  if key ~= '' then
    local holder = redis.call('HGET', KI, tube .. '\0' .. key)
    if holder then
      plain_from = nil
      local old = load(tonumber(holder))
      if replace == '0' then
        local r = reply(old, now); r[1] = 'exists'; return r
      end
      if old.state == RESERVED then return {'conflict', 'the job holding the key is reserved'} end
      erase(old)
      if debounce and old.state ~= BURIED then
        kept = old
        count(tube, 'x', -1)  -- moved, not deleted
      else
        replaced = old.id
      end
    end
  end
  -- The hot path: the new job's record and links are made from locals, without the table that
  -- load() makes (save() and link() of such a table do the same), and the record from the
  -- node's tail (encode() of such a table makes the same bytes).
  local id = kept and kept.id or seq * shards + shard
  local field = fid(id)
  local pri = ARGV[a + 1] + 0
  local due, delay, state
  local created = kept and kept.created or now
  if debounce then
    local at = now + debounce
    if max_wait and created + max_wait < at then at = created + max_wait end
    due, delay, state = due_of(at, '1', now)
  else
    due, delay, state = due_of(ARGV[a + 2] + 0, ARGV[a + 3], now)
  end
  local flags = 0
  if ARGV[a + 7] ~= '' then
    flags = 1
    redis.call('HSET', A, field, ARGV[a + 7])
  end
  records[field] = cmsgpack.pack(LAYOUT, flags, state, pri, due, 0, created, delay) .. ARGV[a + 8]
  if kept then
    -- The tail's counters are zeros: the job keeps its own.
    local j = load(id)
    j.reserves, j.timeouts, j.releases, j.buries, j.kicks =
      kept.reserves, kept.timeouts, kept.releases, kept.buries, kept.kicks
    save(j)
  end
  if state == DELAYED then
    add_timer(id, due); count(tube, 'd', 1)
  else
    make_ready(tube, pri, id, group)
  end
  if key ~= '' then redis.call('HSET', KI, tube .. '\0' .. key, field) end
  if group ~= '' then redis.call('ZADD', G, 0, gprefix(tube, group) .. pad(id)) end
  if state ~= DELAYED and flow_here(tube) then flow_refresh(tube, group, now) end
  seen[tube] = true
  if kept then
    return {'debounced', id, due,
            {created, kept.reserves, kept.timeouts, kept.releases, kept.buries, kept.kicks}}
  end
  count(tube, 'n', 1)
  -- The caller knows the rest of the job: its id, due time and the present (which the call
  -- answers once) are enough, and the body does not travel back.
  return {'ok', id, due, replaced}
end

-- The best ready job of each tube named from ARGV[from] on, as head_of() gives it ('' for none,
-- or for a paused tube): what a node keeps of the shard, to try the best shard first; and how
-- many ready jobs each has here, up to DEPTH (the node sends that many reserves at once). Two
-- arrays, or for more than MANY_TUBES tubes two strings: the heads joined by '\n', the depths
-- by ','.
local DEPTH = 8

-- Whether the tube is not paused in this shard at `now` (its pause read once a call while the
-- call asks of one tube).
local function unpaused(tube, now)
  if memo.pause_tube ~= tube then
    memo.pause_tube, memo.pause_until = tube, tonumber(redis.call('HGET', P, tube) or '0')
  end
  return memo.pause_until <= now
end

-- Over many tubes (a worker watching hundreds), most have held no job in this shard: one
-- SMISMEMBER of the shard's set of tubes answers for them, instead of two reads each (1,000
-- tubes over 128 shards: 256,000 reads, about a second of Redis). Every tube holding a job here
-- is in the set (tidy_all takes out only those that hold none); those this call put into (seen)
-- reach it at flush(), and count too. Answers ARGV index -> whether to look, or nil for few
-- tubes (each is looked at). For many, heads() answers in two strings rather than two arrays of
-- as many elements (1,000 tubes over 128 shards: 256,000 replies to encode and parse).
local MANY_TUBES = 16
local function present(from, to)
  if to - from + 1 <= MANY_TUBES then return nil end
  local out = {}
  if redis.call('SCARD', TUBES) <= to - from + 1 then -- the set is the smaller: read it whole
    local set = {}
    for _, tube in ipairs(redis.call('SMEMBERS', TUBES)) do set[tube] = true end
    for i = from, to do out[i] = set[ARGV[i]] or seen[ARGV[i]] == true end
    return out
  end
  for i = from, to, 1000 do
    local last = math.min(i + 999, to)
    local member = redis.call('SMISMEMBER', TUBES, unpack(ARGV, i, last))
    for k = 1, #member do out[i + k - 1] = member[k] == 1 or seen[ARGV[i + k - 1]] == true end
  end
  return out
end

local function heads(from, now, to)
  local out, depth = {}, {}
  to = to or #ARGV
  local here = present(from, to)
  for i = from, to do
    local h, n = '', 0
    if (not here or here[i]) and unpaused(ARGV[i], now) then
      local members = first(R, ARGV[i], DEPTH)
      memo.r_tube, memo.r_first = ARGV[i], members[1] or false
      if members[1] then h = head_of(ARGV[i], members[1]) end
      n = #members
    end
    out[#out + 1] = h
    depth[#depth + 1] = n
  end
  if here then return table.concat(out, '\n'), table.concat(depth, ',') end
  return out, depth
end

-- The best ready job (its member of r, its head and its record as head_of() read it) of the
-- tubes ARGV[from..to] that are not paused, in the order nodes compare heads (head_of():
-- priority, age, id). With `fresh` (tube -> members this call made ready, which reach r only at
-- flush()), those count too while they are still ready.
local function best_ready(from, to, now, fresh)
  local best, best_head, best_rec
  local here = present(from, to)
  for i = from, to do
    local tube = ARGV[i]
    if (not here or here[i] or (fresh and fresh[tube])) and unpaused(tube, now) then
      local member = first_ready(tube)
      for _, new in ipairs(fresh and fresh[tube] or {}) do
        if readies[new] and (not member or new < member) then member = new end
      end
      if member then
        local head, rec = head_of(tube, member)
        if not best or before(head, best_head) then best, best_head, best_rec = member, head, rec end
      end
    end
  end
  return best, best_head, best_rec
end

-- The reserves waiting on the caller given from ARGV[i] on, as `holder n tube...` each: each is
-- handed the best ready job of its tubes (best_ready()), the jobs this call made ready
-- included, as a reserve would be. Answers reply() of each one's job, or false, in their order.
-- So a job made ready for a waiting worker (by a firing, by a put) reaches it in one call, not
-- that call and then a reserve.
local function serve(i, now)
  local served = {}
  local fresh = {}  -- tube -> the members this call made ready
  if i <= #ARGV then
    for member in pairs(readies) do
      local tube = string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
      fresh[tube] = fresh[tube] or {}
      table.insert(fresh[tube], member)
    end
  end
  while i + 1 <= #ARGV do
    local holder, n = ARGV[i], tonumber(ARGV[i + 1])
    served[#served + 1] = false
    for _ = 1, 3 do
      local best, _, rec = best_ready(i + 2, i + 1 + n, now, fresh)
      if not best then break end
      local j = load_member(best, rec)
      if j then
        served[#served] = reply(j, now, move(j, now, take(holder, now)))
        break
      end
      remove_ready(best) -- as read: a ready entry without its job
    end
    i = i + 2 + n
  end
  return served
end

-- put shards shard <9 arguments> [holder n tube...]...: one job, and the reserves given
-- served (serve()); {'ok', id, due, replaced, now, served} or a refusal as put_one() answers it.
ops.put = function()
  local now = now_ms()
  local r = put_one(4, now, redis.call('INCR', SEQ), ARGV[2] + 0, ARGV[3] + 0)
  if r[1] == 'ok' or r[1] == 'debounced' then
    r[5] = now
    r[6] = serve(13, now)
  end
  return r
end

-- putmany shards shard n <9 arguments>... [holder n tube...]...: n jobs of one shard in one call
-- (a node sends together the puts that arrive together), and the reserves given served;
-- {'ok', now, <put_one()'s reply>..., served}. A put refused (exists, conflict) leaves its
-- number unused.
ops.putmany = function()
  local now = now_ms()
  local out = {'ok', now}
  local n = ARGV[4] + 0
  local shards, shard = ARGV[2] + 0, ARGV[3] + 0
  local seq = redis.call('INCRBY', SEQ, n) - n
  plain_from = seq -- put_one() forgets it for a job not put plainly (plain_puts(), run.lua)
  for a = 5, 4 + 9 * n, 9 do
    seq = seq + 1
    out[#out + 1] = put_one(a, now, seq, shards, shard)
  end
  out[#out + 1] = serve(5 + 9 * n, now)
  return out
end

-- Whether head a comes before head b by priority and time of put alone: across shards, ids of
-- jobs put in the same millisecond say nothing of which came first.
local function sooner(a, b)
  local p1, c1 = string.match(a, '^(%d+):(%d+):')
  local p2, c2 = string.match(b, '^(%d+):(%d+):')
  p1, c1, p2, c2 = tonumber(p1), tonumber(c1), tonumber(p2), tonumber(c2)
  if p1 ~= p2 then return p1 < p2 end
  return c1 < c2
end

-- The best ready job of the tubes ARGV[from..to] in this shard (best_ready()), reserved for
-- holder, unless bound (the best the node knows of in the other shards; '' for none) comes
-- before it (by before(), or with `loose` by sooner()): then {'worse', message, heads, depths}. The reply is reply()'s and a sixth and
-- seventh element, the tubes' heads() and depths after the reserve; 'notfound' carries them third
-- and fourth.
local function reserve_from(holder, bound, from, to, now, loose)
  local best, best_head, best_rec = best_ready(from, to, now)
  if not best then
    local h, d = heads(from, now, to)
    return {'notfound', 'no ready job', h, d}
  end
  if bound ~= '' and (loose and sooner or before)(bound, best_head) then
    local h, d = heads(from, now, to)
    return {'worse', 'a better job in another shard', h, d}
  end
  local j = load_member(best, best_rec)
  local r = reply(j, now, move(j, now, take(holder, now)))
  r[6], r[7] = heads(from, now, to)
  return r
end

-- reserve holder bound tube...: reserve_from().
ops.reserve = function()
  return reserve_from(ARGV[2], ARGV[3], 4, #ARGV, now_ms())
end

-- probe tube...: {'ok', heads, depths} of the tubes in this shard.
ops.probe = function()
  local h, d = heads(2, now_ms())
  return {'ok', h, d}
end

-- probe_all n base... tube...: probe's heads and depths of the tubes in each of the n shards
-- named by their keys' base ("dq:{s}"), in one call (as look_all, through the registration that
-- allows other slots' keys); '-2' for a shard this Redis does not serve. Replies {'ok', {{heads,
-- depths} or '-2' for each shard}}.
ops.probe_all = function()
  local n, now, out = tonumber(ARGV[2]), now_ms(), {}
  for i = 3, n + 2 do
    J, P, R, TUBES = ARGV[i] .. ':j', ARGV[i] .. ':p', ARGV[i] .. ':r', ARGV[i] .. ':tubes'
    forget_reads()
    local ok, h, d = pcall(heads, n + 3, now)
    out[#out + 1] = ok and {h, d} or '-2'
  end
  return {'ok', out}
end

-- reserve_job holder id: any state but reserved.
ops.reserve_job = function()
  local j = load(tonumber(ARGV[3]))
  if not j or j.state == RESERVED then return {'notfound', 'no such job, or it is reserved'} end
  local now = now_ms()
  -- A delayed job taken early became ready now, as a kicked one does: its due time says so.
  local reserve = take(ARGV[2], now)
  return reply(j, now, move(j, now, function(x)
    if x.state == DELAYED then x.due = math.min(x.due, now) end
    reserve(x)
  end))
end

-- The delete of job j (nil: none) by holder: any job not reserved by another; {'ok', id}. With
-- tubes ARGV[from..to], a prefetch: the holder's next job is reserved in the same call
-- (reserve_from() of them, loose: the shard's best, unless another's was put in an earlier
-- millisecond), and its answer is the reply's third element.
local function erase_one(j, holder, bound, from, to)
  if not j then return {'notfound', 'no such job'} end
  if j.state == RESERVED and j.holder ~= holder then
    return {'conflict', 'the job is reserved by another client'}
  end
  erase(j)
  local r = {'ok', string.format('%d', j.id)}
  if from <= to then r[3] = reserve_from(holder, bound, from, to, now_ms(), true) end
  return r
end

-- erase holder id tube key [bound tube...]: erase_one() of the job by id, or by tube and key.
ops.erase = function()
  return erase_one(find(3), ARGV[2], ARGV[6] or '', 7, #ARGV)
end

-- erasemany n [holder id bound k tube...]...: n deletes by id in one call (a node sends those of
-- one turn of its event loop together, per shard), each erase_one() with its k tubes;
-- {'ok', {each one's reply}}.
ops.erasemany = function()
  local out, i = {}, 3
  for _ = 1, tonumber(ARGV[2]) do
    local k = tonumber(ARGV[i + 3])
    out[#out + 1] = erase_one(load(tonumber(ARGV[i + 1])), ARGV[i], ARGV[i + 2], i + 4, i + 3 + k)
    i = i + 4 + k
  end
  return {'ok', out}
end

-- A job this holder has reserved (and, when given, in this reservation).
local function held(id, holder, reservation)
  local j = load(id)
  if not j then return nil, {'notfound', 'no such job'} end
  if j.state ~= RESERVED or j.holder ~= holder then
    return nil, {'conflict', 'the job is not reserved by this client'}
  end
  if reservation ~= '' and tonumber(reservation) ~= j.reserves then
    return nil, {'conflict', 'the job was reserved again since'}
  end
  return j
end

-- release holder id pri(or '') delay_ms(or '') reservation(or '') [undo]. Without a delay the
-- job is given back, as when its holder's connection closes: ready again (or buried, if its
-- attempts are used), and neither its releases nor its delay change, as in beanstalkd. With undo
-- '1', the reservation never reached a client (its reserve was cancelled while the call ran): it
-- is taken back, uncounted, and the job is ready again whatever its attempts.
ops.release = function()
  local j, err = held(tonumber(ARGV[3]), ARGV[2], ARGV[6])
  if not j then return err end
  local now = now_ms()
  unlink(j)
  j.holder = ''; j.deadline = 0
  if ARGV[4] ~= '' then j.pri = tonumber(ARGV[4]) end
  -- A worker's release counts, also the one max-attempts turns into a bury (a closed
  -- connection's give-back, without a delay, counts as neither release nor change of delay).
  if ARGV[5] ~= '' then j.releases = j.releases + 1 end
  local undo = ARGV[7] == '1'
  if undo then j.reserves = j.reserves - 1 end
  if not undo and ends_in_bury(j) then
    j.state = BURIED; j.buries = j.buries + 1
  elseif ARGV[5] == '' then
    j.state = READY; j.due = now
  else
    local delay = tonumber(ARGV[5])
    j.delay = delay
    if delay > 0 then j.state = DELAYED; j.due = now + delay
    else j.state = READY; j.due = now end
  end
  local rec = save(j)
  link(j, now)
  return reply(j, now, rec)
end

-- bury holder id pri(or '')
ops.bury = function()
  local j, err = held(tonumber(ARGV[3]), ARGV[2], '')
  if not j then return err end
  local now = now_ms()
  return reply(j, now, move(j, now, function()
    j.holder = ''; j.deadline = 0; j.state = BURIED; j.buries = j.buries + 1
    if ARGV[4] ~= '' then j.pri = tonumber(ARGV[4]) end
  end))
end

-- touch holder id
ops.touch = function()
  local j, err = held(tonumber(ARGV[3]), ARGV[2], '')
  if not j then return err end
  local now = now_ms()
  return reply(j, now, move(j, now, function() j.deadline = now + j.ttr * 1000 end))
end

-- peek id tube key
ops.peek = function()
  local j = find(2)
  if not j then return {'notfound', 'no such job'} end
  return reply(j, now_ms())
end

-- peek_next tube state: ready (best priority), buried (oldest), delayed (earliest due; walks the
-- shard's timers in order, so it costs the timers before the tube's first delayed job).
ops.peek_next = function()
  local tube, state = ARGV[2], ARGV[3]
  local now = now_ms()
  if state == 'ready' or state == 'buried' then
    local head = first(state == 'ready' and R or B, tube, 1)[1]
    if not head and state == 'ready' and flow_here(tube) then
      -- Every group with ready jobs is held back: the best of their best jobs, by (priority,
      -- id), as on a single delayqd. For this case only: it scans the shard's group states
      -- (those of every flow-controlled tube here) and reads each of this tube's best.
      each_group(tube, function(group)
        local m = group_best(tube, group)
        if m and (not head or string.sub(m, -26) < string.sub(head, -26)) then head = m end
      end)
    end
    if not head then return {'notfound', 'none'} end
    return reply(load(id_of(head)), now)
  end
  local j = delayed_of(tube, 1)[1]
  if not j then return {'notfound', 'none'} end
  return reply(j, now)
end

-- kick_job id: buried or delayed -> ready.
ops.kick_job = function()
  local j = load(tonumber(ARGV[2]))
  if not j then return {'notfound', 'no such job'} end
  if j.state ~= BURIED and j.state ~= DELAYED then return {'conflict', 'not buried or delayed'} end
  local now = now_ms()
  return reply(j, now, move(j, now, kicked(now)))
end

-- The first n buried (lowest id first) or delayed (earliest due first) jobs of the tube.
local function kick_order(tube, state, n)
  if state ~= 'buried' then return delayed_of(tube, n) end
  local jobs = {}
  for _, member in ipairs(first(B, tube, n)) do table.insert(jobs, load(id_of(member))) end
  return jobs
end

-- kickable tube state n: the first n buried (state 'buried') or delayed jobs of the tube, in the
-- order kick takes them: {'ok', {id, order}...}, the order being the id for a buried job and the
-- due time for a delayed one. A node asks every shard, and kicks the first of all (n is at most
-- 1,000: a larger kick takes more rounds).
ops.kickable = function()
  local out = {}
  for _, j in ipairs(kick_order(ARGV[2], ARGV[3], tonumber(ARGV[4]))) do
    table.insert(out, {fid(j.id), ARGV[3] == 'buried' and fid(j.id) or us(j.due)})
  end
  return {'ok', out}
end

-- kick tube state bound: up to bound buried (lowest id first) or delayed (earliest due) jobs.
ops.kick = function()
  local now = now_ms()
  local jobs = kick_order(ARGV[2], ARGV[3], tonumber(ARGV[4]))
  for _, j in ipairs(jobs) do move(j, now, kicked(now)) end
  return {'ok', #jobs}
end

-- update id tube key due(or '') absolute pri(or '')
ops.update = function()
  local j = find(2)
  if not j then return {'notfound', 'no such job'} end
  local now = now_ms()
  if ARGV[5] ~= '' then
    if j.state ~= DELAYED and j.state ~= READY then
      return {'conflict', 'only a delayed or ready job can be rescheduled'}
    end
    move(j, now, function()
      schedule(j, tonumber(ARGV[5]), ARGV[6], now)
      if ARGV[7] ~= '' then j.pri = tonumber(ARGV[7]) end
    end)
  elseif ARGV[7] ~= '' then
    local pri = tonumber(ARGV[7])
    if j.state == READY then
      move(j, now, function() j.pri = pri end) -- to its new place among the ready
    else
      j.pri = pri
      save(j)
    end
  end
  return reply(j, now)
end

-- group tube group how holder: the group's jobs ('0': {'ok', id, record...}), how many the shard
-- holds ('n': {'ok', n}, so that a cancel calls only the shards that hold some), or their cancel
-- ('1': deletes those not reserved, {'ok', deleted}).
ops.group = function()
  local prefix = gprefix(ARGV[2], ARGV[3])
  if ARGV[4] == 'n' then
    return {'ok', redis.call('ZLEXCOUNT', G, '[' .. prefix, '[' .. prefix .. '9999999999999999')}
  end
  local ids = {}
  for _, member in ipairs(redis.call('ZRANGEBYLEX', G, '[' .. prefix, '[' .. prefix .. '9999999999999999')) do
    table.insert(ids, string.sub(member, -16))
  end
  local out = {'ok'}
  local deleted = 0
  for _, member in ipairs(ids) do
    local j = load(tonumber(member))
    if j then
      if ARGV[4] == '1' then
        if j.state ~= RESERVED then erase(j); deleted = deleted + 1 end
      else
        table.insert(out, string.format('%d', j.id)); table.insert(out, encode(j))
      end
    end
  end
  if ARGV[4] == '1' then return {'ok', deleted} end
  return out
end

-- note holder id attachment: keeps a delivery's outcome with the job.
ops.note = function()
  local j = load(tonumber(ARGV[3]))
  if not j then return {'notfound', 'no such job'} end
  redis.call('HSET', A, fid(j.id), ARGV[4])
  if j.flags % 2 == 0 then j.flags = j.flags + 1; save(j) end
  return reply(j, now_ms())
end

-- stats tube...: per tube, {name, ready, urgent, reserved, delayed, buried, total, deletes,
-- timeouts, groups held, groups servable}; with no tube, every tube of the shard, and the counts
-- of the tubes it forgot (tidy_all) under the name '' (no tube's: the node adds them to the
-- server's totals and lists no such tube).
ops.stats = function()
  local tubes = {}
  for i = 2, #ARGV do table.insert(tubes, ARGV[i]) end
  local out = {'ok'}
  if #tubes == 0 then
    tubes = redis.call('SMEMBERS', TUBES)
    local gone = redis.call('HMGET', C, '\0n', '\0x', '\0o')
    if gone[1] or gone[2] or gone[3] then
      table.insert(out, {'', 0, 0, 0, 0, 0, tonumber(gone[1] or '0'), tonumber(gone[2] or '0'),
        tonumber(gone[3] or '0'), 0, 0})
    end
  end
  for _, tube in ipairs(tubes) do
    local c = redis.call('HMGET', C, tube .. '\0v', tube .. '\0d', tube .. '\0n', tube .. '\0x',
      tube .. '\0o')
    local from, to = '[' .. tube .. '\0', '(' .. tube .. '\1'
    local ready, urgent
    local held, servable = 0, 0
    local f = flow_here(tube)
    if f then
      ready = redis.call('ZLEXCOUNT', FW, from, to)
      urgent = tonumber(redis.call('HGET', C, tube .. '\0u') or '0')
      -- Groups are counted while flow control is on: a tube whose settings were all turned off
      -- stays in its shard, its groups no longer held back by anything (as a single delayqd,
      -- which forgets them then, counts none).
      if f.conc > 0 or f.fair or f.rate > 0 then
        each_group(tube, function(group, raw)
          if group == '' then return end -- the jobs with no group are no group
          local _, _, _, head = cmsgpack.unpack(raw)
          if head ~= '' then
            servable = servable + 1
          elseif group_best(tube, group) then
            held = held + 1
          end
        end)
      end
    else
      ready = redis.call('ZLEXCOUNT', R, from, to)
      urgent = redis.call('ZLEXCOUNT', R, from, '(' .. tube .. '\0' .. '0000001024')
    end
    table.insert(out, {tube, ready, urgent,
      tonumber(c[1] or '0'), tonumber(c[2] or '0'), redis.call('ZLEXCOUNT', B, from, to),
      tonumber(c[3] or '0'), tonumber(c[4] or '0'), tonumber(c[5] or '0'), held, servable})
  end
  return out
end

-- flow tube home conc fair rate period burst [group weight]...: the tube's flow control
-- settings, and its home shard, kept in this shard's f. The first time (the tube not yet
-- pinned), only where the shard holds no job of the tube: {'conflict', why} otherwise, and the
-- node takes back what it set elsewhere (unflow). In the home shard, every group is looked at
-- again under the new settings, its turns and rate started afresh.
ops.flow = function()
  local tube, home = ARGV[2], ARGV[3] + 0
  local old = flow_entry(tube)
  if not old and holds_jobs(tube) then
    return {'conflict', 'the tube has jobs; flow control in Redis mode keeps all of a tube\'s jobs in one shard, so it is set on a tube before its first job'}
  end
  if old and old.home ~= home then return {'conflict', 'the tube lives in shard ' .. old.home} end
  local e = {home = home, conc = ARGV[4] + 0, fair = ARGV[5] == '1', rate = ARGV[6] + 0,
             period = ARGV[7] + 0, burst = ARGV[8] + 0, weights = {}}
  for i = 9, #ARGV - 1, 2 do e.weights[ARGV[i]] = ARGV[i + 1] + 0 end
  redis.call('HSET', F, tube, cmsgpack.pack(e))
  flows[tube] = e
  if home == this_shard() and old then
    -- As on a single delayqd, new settings start every group's turns and rate afresh: the
    -- tube's virtual time and each group's turn go back to 0 and its bucket is full; its
    -- reservations stay counted.
    redis.call('HDEL', FG, tube .. '\1')
    local groups = {}
    each_group(tube, function(group) groups[#groups + 1] = group end)
    local now = now_ms()
    for _, group in ipairs(groups) do
      local g = group_state(tube, group, e, now)
      g.start, g.finish, g.tokens, g.at = 0, 0, e.burst, now
      flow_refresh(tube, group, now)
    end
  end
  return {'ok'}
end

-- unflow tube: takes back a first flow that another shard refused (only while this shard holds
-- no job of the tube).
ops.unflow = function()
  if not holds_jobs(ARGV[2]) then redis.call('HDEL', F, ARGV[2]) end
  return {'ok'}
end

-- pause tube ms: no job of the tube is reserved from this shard for ms (0 ends a pause).
ops.pause = function()
  forget_reads()
  if ARGV[3] == '0' then redis.call('HDEL', P, ARGV[2])
  else redis.call('HSET', P, ARGV[2], now_ms() + tonumber(ARGV[3])) end
  return {'ok'}
end

-- max_attempts tube n
ops.max_attempts = function()
  if ARGV[3] == '0' then redis.call('HDEL', M, ARGV[2])
  else redis.call('HSET', M, ARGV[2], ARGV[3]) end
  return {'ok'}
end

-- The time a job's timer stands for, to the microsecond: its TTR end if reserved (in t), else
-- its due time (in the pages; both keep that time rounded up to the millisecond).
local function timer_of(j)
  if j.state == RESERVED then return j.deadline end
  return j.due
end

-- fire epoch limit [holder n tube1..tuben]...: as the shard's owner (the epoch must be the
-- lease's), moves due delayed jobs to ready and lapses reserved jobs past their TTR, at most
-- `limit`; replies with how many, the next timer to the microsecond (or -1) and the present, by
-- Redis's clock: never early by the only clock all nodes share. Timer entries keep whole
-- milliseconds, rounded up; a job in the present millisecond moves only once its record's
-- time has come. Then each holder given (a reserve waiting on the caller, for n tubes) is handed
-- the best ready job of its tubes, as a reserve would be: the reply's sixth element has
-- reply() of each one's job, or false, in their order. So a job due for a waiting worker reaches
-- it in one call, not a firing and then a reserve.
ops.fire = function()
  if redis.call('GET', EPOCH) ~= ARGV[2] then return {'fenced', 'not the owner'} end
  local now = now_ms()
  local cut, limit = math.ceil(now), tonumber(ARGV[3])
  flow_wakes(now, limit)
  local due = {} -- {time, id}: a delayed job's page entry; {false, id}: a reservation
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', T, '-inf', cut, 'LIMIT', 0, limit)) do
    due[#due + 1] = {false, tonumber(member)}
  end
  local first = first_page() -- named at or before its first entry: read no page before due
  if first and struct.unpack(ENTRY, first) <= cut and #due < limit then
    each_timer(function(t, id)
      if t > cut or #due >= limit then return false end
      due[#due + 1] = {t, id}
      return true
    end, first)
  end
  local late = {}
  local moved = 0
  for _, timer in ipairs(due) do
    local t, id = timer[1], timer[2]
    local j = load(id)
    -- As read: a timer without its job (or not of its state, or time), taken out.
    if t and (not j or j.state ~= DELAYED or math.ceil(j.due) ~= t) then
      note_timer(t, id, -1)
    elseif not t and (not j or j.state ~= RESERVED) then
      redis.call('ZREM', T, fid(id))
    elseif timer_of(j) <= now then
      moved = moved + 1
      if j.state == DELAYED then
        table.insert(late, string.format('%d', (now - j.due) * 1000)) -- microseconds
      end
      unlink(j)
      if j.state == RESERVED then
        j.timeouts = j.timeouts + 1; j.holder = ''; j.deadline = 0; count(j.tube, 'o', 1)
        if ends_in_bury(j) then j.state = BURIED; j.buries = j.buries + 1
        else j.state = READY; j.due = now end
      else
        j.state = READY
      end
      save(j)
      link(j, now)
    end
  end
  local served = serve(4, now)
  -- The next timer, once what fire took out is gone and what it added (a reservation's TTR) is
  -- in. The owner arms from this answer, so flush() publishes no 't' for it.
  local changed = logged > 0
  apply()
  quiet = true
  write_lapses()
  if changed or not first then first = first_page() end
  first = first and string.sub(page(first), 1, TW)
  local next_at = first and exact_time(first)
  local lapse = redis.call('ZRANGE', T, 0, 0, 'WITHSCORES')
  if lapse[1] then
    local rec = stored(lapse[1])
    local deadline = rec and select(5, record_head(rec, 5))
    local at = deadline and deadline > 0 and deadline or tonumber(lapse[2])
    if not next_at or at < next_at then next_at = at end
  end
  local wake = first_wake()
  if wake and (not next_at or wake < next_at) then next_at = wake end
  if next_at then redis.call('HSET', C, ARMED, us(next_at))
  else redis.call('HDEL', C, ARMED) end
  return {'ok', moved, next_at and us(next_at) or '-1', us(now), late, served}
end

-- The earliest timer of the shard whose keys start with `b` ("dq:{s}"), in whole milliseconds
-- (-1: none): a delayed job's (its first page's first entry), a reservation's end, a group's
-- rate wake. Reads the keys by name, so that look_all can ask it of other shards.
local function earliest_timer(b)
  local earliest
  local name = redis.call('ZRANGE', b .. ':ti', 0, 0)[1]
  local entries = name and redis.call('HGET', b .. ':tp', name)
  if entries and #entries >= TW then earliest = struct.unpack(ENTRY, entries) end
  for _, key in ipairs({':t', ':fz'}) do
    local first = tonumber(redis.call('ZRANGE', b .. key, 0, 0, 'WITHSCORES')[2])
    if first and (not earliest or first < earliest) then earliest = first end
  end
  return earliest and math.ceil(earliest) or -1
end

-- overdue: the shard's earliest timer (or -1) and the present, by Redis's clock. Any node may
-- ask: a timer far behind the present means nobody fires the shard.
ops.overdue = function()
  return {'ok', string.format('%d', earliest_timer(base)), us(now_ms())}
end

-- look_all [base]...: overdue's timer for each shard named by its keys' base, in one call (as
-- renew_all, through the registration that allows other slots' keys); -2 for a shard this Redis
-- does not serve. Replies {'ok', times, the present}.
ops.look_all = function()
  local out = {}
  for i = 2, #ARGV do
    local ok, at = pcall(earliest_timer, ARGV[i])
    out[#out + 1] = ok and string.format('%d', at) or '-2'
  end
  return {'ok', out, us(now_ms())}
end

-- upgrade from: of t's entries from rank `from` on (1,000 looked at), moves the delayed jobs'
-- (layout 1 kept them there) into the pages, their records rewritten in layout 2, and leaves the
-- reservations'; replies {'ok', the rank to go on from, or -1 once t holds nothing more to look
-- at}. (Other records are rewritten when they next change: decode() reads both layouts.)
ops.upgrade = function()
  local from = tonumber(ARGV[2])
  local old = redis.call('ZRANGE', T, from, from + 999)
  if #old == 0 then return {'ok', -1} end
  local gone, kept = {}, 0
  for _, member in ipairs(old) do
    local j = load(tonumber(member))
    if j and j.state == DELAYED then
      add_timer(j.id, j.due)
      save(j)
      gone[#gone + 1] = member
    elseif j and j.state == RESERVED then
      kept = kept + 1
    else
      gone[#gone + 1] = member -- a timer without its job
    end
  end
  if #gone > 0 then in_chunks('ZREM', T, gone) end
  return {'ok', from + kept}
end

-- acquire_all node lease_ms most base...: takes the lease of each shard named by its keys' base
-- ("dq:{s}") where it is free, in order, in one call (as renew_all), until `most` are taken: a
-- node's walk takes no more than its share. Replies {'ok', {for each shard its new epoch; 0:
-- held by another; -1: not tried, `most` taken; -2: not served here}}. A lease already this
-- node's is taken again with a new epoch: the node names only shards it does not hold, so such a
-- lease is one an earlier call took whose answer never came back, which would otherwise lie
-- unused until it lapsed.
ops.acquire_all = function()
  local out, most, taken = {}, tonumber(ARGV[4]), 0
  for i = 5, #ARGV do
    local b, got = ARGV[i], -1
    if taken < most then
      got = 0
      local set = redis.pcall('SET', b .. ':owner', ARGV[2], 'NX', 'PX', ARGV[3])
      if not set and redis.pcall('GET', b .. ':owner') == ARGV[2] then
        set = redis.pcall('SET', b .. ':owner', ARGV[2], 'PX', ARGV[3])
      end
      if type(set) == 'table' and set.err then
        got = -2
      elseif set then
        got = redis.pcall('INCR', b .. ':epoch')
        if type(got) ~= 'number' then
          redis.pcall('DEL', b .. ':owner')
          got = -2
        else
          taken = taken + 1
        end
      end
    end
    out[#out + 1] = got
  end
  return {'ok', out}
end

-- renew node lease_ms epoch
ops.renew = function()
  if redis.call('GET', OWNER) ~= ARGV[2] or redis.call('GET', EPOCH) ~= ARGV[4] then
    return {'fenced', 'lost'}
  end
  redis.call('PEXPIRE', OWNER, ARGV[3])
  return {'ok'}
end

-- renew_all node lease_ms [base epoch]...: renew for each shard named by its keys' base
-- ("dq:{s}"), in one call. KEYS[1] is the first one's owner key; the others are in other slots,
-- which the registration this is called by allows (allow-cross-slot-keys) as long as this Redis
-- serves them: a key it does not serve is an error, caught here. Replies with 1 for each shard
-- renewed and 0 for each not (fenced, or not served here): its node renews those one by one.
ops.renew_all = function()
  local out = {}
  for i = 4, #ARGV - 1, 2 do
    local b, renewed = ARGV[i], 0
    if redis.pcall('GET', b .. ':owner') == ARGV[2] and redis.pcall('GET', b .. ':epoch') == ARGV[i + 1]
        and redis.pcall('PEXPIRE', b .. ':owner', ARGV[3]) == 1 then
      renewed = 1
    end
    out[#out + 1] = renewed
  end
  return {'ok', out}
end

-- heartbeat node lease_ms, with KEYS[1] = dq:nodes: this node lives for another lease; replies
-- with every live node's name.
ops.heartbeat = function()
  local now = now_ms()
  redis.call('ZADD', base, now + tonumber(ARGV[3]), ARGV[2])
  redis.call('ZREMRANGEBYSCORE', base, '-inf', now)
  return {'ok', redis.call('ZRANGE', base, 0, -1)}
end

-- resign node
ops.resign = function()
  if redis.call('GET', OWNER) == ARGV[2] then redis.call('DEL', OWNER) end
  return {'ok'}
end
