-- moves.lua — a call's end (flush(): the gathered writes and the messages) and a job's moves
-- between states, reservations, due times, puts, heads and serving waiting reserves.

local function remove_ready(member)
  if readies[member] then readies[member] = nil else note_taken(member) end
  redis.call('ZREM', R, member)
  memo.r_tube = nil
end

-- Runs cmd key with the flat list of arguments, a thousand pairs per call (Lua's stack bounds
-- how many arguments one call can take).
local function in_chunks(cmd, key, list)
  for i = 1, #list, 2000 do redis.call(cmd, key, unpack(list, i, math.min(i + 1999, #list))) end
end

-- The time the shard's owner will look at it next, as its latest firing answered (ARMED, a field
-- of c; absent: at its periodic look only). A timer this call made earlier than that is told to
-- the owner ('t', with the timer's microsecond), which fires then; ARMED takes that time, so that
-- the calls after this one tell it nothing more until it has fired.
local function tell_owner(at)
  local armed = tonumber(redis.call('HGET', C, ARMED))
  if armed and armed <= at then return end
  local exact = us(at)
  redis.call('HSET', C, ARMED, exact)
  redis.call('SPUBLISH', SEVENTS, 't ' .. base .. ' ' .. exact)
end

-- The reservations made in this call, into t; returns the earliest end (nil: none).
local function write_lapses()
  local list, n, earliest = {}, 0, nil
  for member, at in pairs(lapses) do
    list[n + 1] = string.format('%d', math.ceil(at)); list[n + 2] = member; n = n + 2
    if not earliest or at < earliest then earliest = at end
  end
  lapses = {}
  in_chunks('ZADD', T, list)
  return earliest
end

-- The readies into r, and where a tube's best ready job in the shard changed, messages to every
-- node: 'r' for a better one (the best new ready job of each tube, against the best the shard
-- held before they are added), so that a reserve takes the best job of every shard; 'h' with the
-- best a reserve or a delete left ('' for none), so that no node asks for a job another took (a
-- call each that finds it gone).
local function tell_heads()
  local best, told, list = {}, {}, {}
  for member in pairs(readies) do
    table.insert(list, 0); table.insert(list, member)
    local tube = string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
    if not best[tube] or member < best[tube] then best[tube] = member end
  end
  for tube, member in pairs(best) do
    local head = first_ready(tube)
    if not head or member < head then
      local h = head_of(tube, member)
      redis.call('SPUBLISH', SEVENTS, 'r ' .. base .. ' ' .. tube .. ' ' .. (caller or '-') .. ' ' .. h)
      table.insert(readied, {tube, h})
      told[tube] = true
    end
  end
  in_chunks('ZADD', R, list)
  if #list > 0 then memo.r_tube = nil end
  for tube, was in pairs(taken) do
    local now_best = first_ready(tube)
    if not told[tube] and now_best ~= was then
      redis.call('SPUBLISH', SEVENTS, 'h ' .. base .. ' ' .. tube .. ' ' .. (caller or '-') .. ' ' ..
        (now_best and head_of(tube, now_best) or ''))
    end
  end
end

local function flush()
  flow_flush()
  local list, n = {}, 0
  for field, rec in pairs(records) do list[n + 1] = field; list[n + 2] = rec; n = n + 2 end
  in_chunks('HSET', J, list)
  apply()
  list, n = {}, 0
  local gone = {}
  for name in pairs(dirty) do
    if pages[name] then list[n + 1] = name; list[n + 2] = pages[name]; n = n + 2
    else gone[#gone + 1] = name end
  end
  in_chunks('HSET', TP, list)
  if #gone > 0 then in_chunks('HDEL', TP, gone) end
  -- The earliest timer this call made, told to the owner (not by fire, whose caller arms from
  -- its answer): a reservation's end; a group's rate wake (flow.lua) that came first in fz; a due
  -- time earlier than every other of the shard's delayed jobs (a put appended after a page's
  -- entries cannot be).
  local earliest = write_lapses()
  if not quiet then
    if fz_lead and (not earliest or fz_lead < earliest) then earliest = fz_lead end
    local first = leads and first_timer()
    if first and added[first] then
      local at = exact_time(first)
      if not earliest or at < earliest then earliest = at end
    end
    if earliest then tell_owner(earliest) end
  end
  tell_heads()
  for name, by in pairs(counters) do
    if by ~= 0 then redis.call('HINCRBY', C, name, by) end
  end
  list = {}
  for tube in pairs(seen) do table.insert(list, tube) end
  in_chunks('SADD', TUBES, list)
end

-- A job becomes ready: in r, or for a pinned tube in its group's jobs (then flow_refresh()).
local function make_ready(tube, pri, id, group)
  if flow_here(tube) then flow_in(tube, group, pri, id)
  else readies[rmember(tube, pri, id)] = true end
end

-- Takes the job out of wherever its state keeps it (not the record, key or group).
local function unlink(j)
  if j.state == DELAYED then
    remove_timer(j.id, j.due); count(j.tube, 'd', -1)
  elseif j.state == READY then
    if flow_here(j.tube) then flow_out(j.tube, j.group, j.pri, j.id)
    else remove_ready(rmember(j.tube, j.pri, j.id)) end
  elseif j.state == RESERVED then
    local member = fid(j.id)
    lapses[member] = nil
    redis.call('ZREM', T, member)
    count(j.tube, 'v', -1)
    if flow_here(j.tube) then flow_freed(j, now_ms()) end
  else
    redis.call('ZREM', B, bmember(j.tube, j.id))
  end
end

-- Puts the job where its (new) state keeps it.
local function link(j, now)
  local pinned = flow_here(j.tube)
  if j.state == DELAYED then
    add_timer(j.id, j.due); count(j.tube, 'd', 1)
  elseif j.state == READY then
    make_ready(j.tube, j.pri, j.id, j.group)
  elseif j.state == RESERVED then
    lapses[fid(j.id)] = j.deadline; count(j.tube, 'v', 1)
    if pinned then flow_taken(j, now) end
  else
    redis.call('ZADD', B, 0, bmember(j.tube, j.id))
  end
  if pinned then flow_refresh(j.tube, j.group, now) end
end

-- A job changes state: out of where it was, changed, stored, and into where it is now kept.
-- Returns its record as stored (for reply()).
local function move(j, now, change)
  unlink(j)
  change(j)
  local rec = save(j)
  link(j, now)
  return rec
end

-- A reservation starts: the job is the holder's until its TTR lapses.
local function take(holder, now)
  return function(j)
    j.state = RESERVED; j.holder = holder; j.reserves = j.reserves + 1
    j.deadline = now + j.ttr * 1000
  end
end

local function kicked(now)
  return function(j) j.state = READY; j.due = now; j.kicks = j.kicks + 1 end
end

-- A new due time, from a delay in ms (when, absolute = '0') or a Unix ms time: delayed if it is
-- in the future, else ready now.
local function due_of(when, absolute, now)
  local due, delay
  if absolute == '1' then due = when; delay = math.max(0, when - now)
  elseif when <= 0 then due = now; delay = 0
  else due = now + when; delay = when end
  if due > now then return due, delay, DELAYED end
  return now, delay, READY
end

local function schedule(j, when, absolute, now)
  j.due, j.delay, j.state = due_of(when, absolute, now)
end

-- The timers a walk of delayed_of() may visit before it gives up with an error (nil: no bound;
-- each sets it, so that one call across shards stays short), and the timers it visited.
local walk_limit, walked = nil, 0

-- The first n delayed jobs of a tube, earliest due first. Delayed jobs of every tube share the
-- timers, so this walks them in order: it costs the timers before the tube's n-th job.
local function delayed_of(tube, n)
  local found = {}
  if n < 1 then return found end
  each_timer(function(_, id)
    walked = walked + 1
    if walk_limit and walked > walk_limit then error('delayq: a walk too long to share a call') end
    local j = load(id)
    if j and j.state == DELAYED and j.tube == tube then table.insert(found, j) end
    return #found < n
  end)
  return found
end

local function erase(j)
  unlink(j)
  records[fid(j.id)] = nil
  redis.call('HDEL', J, fid(j.id))
  if j.flags % 2 == 1 then redis.call('HDEL', A, fid(j.id)) end
  if j.key ~= '' then redis.call('HDEL', KI, j.tube .. '\0' .. j.key) end
  if j.group ~= '' then redis.call('ZREM', G, gprefix(j.tube, j.group) .. pad(j.id)) end
  count(j.tube, 'x', 1)
  if flow_here(j.tube) then flow_refresh(j.tube, j.group, now_ms()) end
end

-- A job as a reply: its id, record and attachment, and the present. `rec`: its record as just
-- stored (save(), move()), not encoded again.
local function reply(j, now, rec)
  local field = fid(j.id)
  local attachment = false
  if j.flags % 2 == 1 then attachment = redis.call('HGET', A, field) or false end
  return {'ok', field, rec or encode(j), attachment, string.format('%d', now)}
end

-- A job id given by the caller: by id, or by tube and key (ARGV[i] = id or '', ARGV[i+1] tube,
-- ARGV[i+2] key).
local function find(i)
  local id = tonumber(ARGV[i])
  if ARGV[i] == '' then
    moved_to = flow_elsewhere(ARGV[i + 1])
    if moved_to then return nil end
    id = tonumber(redis.call('HGET', KI, ARGV[i + 1] .. '\0' .. ARGV[i + 2]) or '')
  end
  if not id then return nil end
  return load(id)
end

local function max_attempts(tube)
  return tonumber(redis.call('HGET', M, tube) or '0')
end

-- A reservation ends without a delete or a bury: buried when it was the tube's last attempt.
local function ends_in_bury(j)
  local max = max_attempts(j.tube)
  return max > 0 and j.reserves >= max
end
