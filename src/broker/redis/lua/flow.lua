-- flow.lua — flow control (docs/flow-control.md): group concurrency, fair turns and a rate per
-- group, for the tubes pinned to one shard. A tube with flow control keeps every job in its home
-- shard, so that one script sees each group's reservations and turns whole; every shard's f says
-- where the tube lives, and a put or a lookup by key that reaches another answers 'moved'.
--
-- In the home shard a pinned tube's ready jobs are kept per group: all in fw, and each group that
-- may be served now has its best job, its head, in r as well, so that a reserve takes the best
-- head as it takes any tube's best job. A head's member of r is tube \0 priority(10) \0 turn(16)
-- \0 id(16): under fair turns, heads of one priority are taken by turn (start-time fair queueing,
-- as the local engine: a head's turn is max(the tube's virtual time, the end of its group's last
-- turn), a turn lasts KTURN / the group's weight), else the turn is 0 and the order is (priority,
-- id) as in any tube. So a reserve costs O(log groups), and a held-back group costs nothing
-- until one of its reservations ends.
--
--  20 f   hash  tube -> cmsgpack {home, conc, fair, rate, period (ms), burst, weights}
--  21 fg  hash  tube \0 group -> cmsgpack (reserved, start, finish, head, tokens, tokens_at),
--               kept while the group has ready or reserved jobs (or a bucket not yet full);
--               tube \1 -> the tube's virtual time
--  22 fw  zset  ready jobs of pinned tubes, score 0, member: tube \0 len(group)(3) group
--               priority(10) id(16)
--  23 fz  zset  tube \0 group by when its rate's next token comes (ms), for a group held back by
--               its rate alone, or by when its bucket is full again, for one with nothing left:
--               the shard's owner looks at it again then (fire), as at a due time
-- and in c, tube \0 u: a pinned tube's urgent ready jobs (r holds only heads; its ready jobs are
-- counted in fw).

local F, FG, FW, FZ
local KTURN = 720720 -- a turn of weight 1, divisible by every weight up to 16
local flows          -- tube -> its f entry, or false: read once per call
local was_head       -- id -> the turn it held as its group's head, when a call took it out of r
local moved_to       -- set by a lookup that belongs to another shard: run() answers 'moved'
local fz_lead        -- a time this call put first in fz: flush() tells the owner ('t')
local gstates        -- tube \0 group -> its state, as read and changed in this call
local gdirty         -- tube \0 group -> true: to write (or delete) at flush()

local shard_here -- this shard's number, read from base once per call
local function this_shard()
  if not shard_here then shard_here = tonumber(string.match(base, '{(%d+)}$')) end
  return shard_here
end

local function flow_entry(tube)
  local e = flows[tube]
  if e == nil then
    local raw = redis.call('HGET', F, tube)
    e = raw and cmsgpack.unpack(raw) or false
    flows[tube] = e
  end
  return e
end

-- The settings of a tube pinned here (nil for any other).
local function flow_here(tube)
  local e = flow_entry(tube)
  if e and e.home == this_shard() then return e end
  return nil
end

-- The home shard of a tube pinned to another (nil if here, or not pinned).
local function flow_elsewhere(tube)
  local e = flow_entry(tube)
  if e and e.home ~= this_shard() then return e.home end
  return nil
end

local function gfield(tube, group) return tube .. '\0' .. group end
local function wmember(tube, group, pri, id)
  return gprefix(tube, group) .. string.format('%010d', pri) .. pad(id)
end
-- The group's best ready job (its member of fw), or nil.
local function group_best(tube, group)
  local gp = gprefix(tube, group)
  return redis.call('ZRANGEBYLEX', FW, '[' .. gp, '(' .. gp .. ':', 'LIMIT', 0, 1)[1]
end

-- A group's state as this call left it (read once per call; written back by flow_flush()).
local function group_state(tube, group, s, now)
  local field = gfield(tube, group)
  local g = gstates[field]
  if g and not g.gone then return g end
  local raw = not g and redis.call('HGET', FG, field)
  g = {}
  if raw then
    g.reserved, g.start, g.finish, g.head, g.tokens, g.at = cmsgpack.unpack(raw)
  else
    g.reserved, g.start, g.finish, g.head, g.tokens, g.at = 0, 0, 0, '', s.burst, now
  end
  gstates[field] = g
  return g
end

local function save_group(tube, group, g)
  g.gone = nil
  gdirty[gfield(tube, group)] = true
end

local function forget_group(tube, group, g)
  g.gone = true
  gdirty[gfield(tube, group)] = true
end

local function flow_flush()
  local list, gone = {}, {}
  for field in pairs(gdirty) do
    local g = gstates[field]
    if g.gone then
      gone[#gone + 1] = field
    else
      list[#list + 1] = field
      list[#list + 1] = cmsgpack.pack(g.reserved, g.start, g.finish, g.head, g.tokens, g.at)
    end
  end
  for i = 1, #list, 2000 do redis.call('HSET', FG, unpack(list, i, math.min(i + 1999, #list))) end
  for i = 1, #gone, 4000 do redis.call('HDEL', FG, unpack(gone, i, math.min(i + 3999, #gone))) end
end

local function virtual_time(tube) return tonumber(redis.call('HGET', FG, tube .. '\1') or '0') end

-- A rate's bucket, filled up to the present (Redis's clock).
local function refill(s, g, now)
  if s.rate == 0 or now <= g.at then return end
  g.tokens = math.min(s.burst, g.tokens + s.rate / s.period * (now - g.at))
  g.at = now
end

local function may_serve(s, g, group, now)
  if group == '' then return true end -- the jobs with no group: nothing holds them back
  if s.conc > 0 and g.reserved >= s.conc then return false end
  if s.rate == 0 then return true end
  refill(s, g, now)
  return g.tokens >= 1 - 1e-9
end

-- When a bucket holds `tokens` (from g.tokens at g.at), in whole ms, at least 1 ms from now.
local function tokens_at(s, g, tokens, now)
  return math.max(now + 1, math.ceil(g.at + (tokens - g.tokens) * s.period / s.rate))
end

local function unready(member)
  if readies[member] then readies[member] = nil else note_taken(member) end
  redis.call('ZREM', R, member)
  memo.r_tube = nil
end

-- Puts the group's head in r (its best ready job, with its turn) if it may be served, else
-- takes it out; and forgets a group with nothing left.
local function flow_refresh(tube, group, now)
  local s = flow_here(tube)
  local g = group_state(tube, group, s, now)
  local serve = may_serve(s, g, group, now)
  -- The group's best ready job: not needed by a group held back by its reservations alone
  -- (the common case just after a reserve), which keeps no head and is not empty.
  local best
  if serve or g.reserved == 0 or s.rate ~= 0 then best = group_best(tube, group) end
  local want = ''
  if best and serve then
    if g.head == '' then g.start = s.fair and math.max(virtual_time(tube), g.finish) or 0 end
    local gp = #gprefix(tube, group)
    want = tube .. '\0' .. string.sub(best, gp + 1, gp + 10) .. '\0' ..
      string.format('%016d', s.fair and g.start or 0) .. '\0' .. string.sub(best, -16)
  end
  if want ~= g.head then
    if g.head ~= '' then unready(g.head) end
    if want ~= '' then readies[want] = true end
    g.head = want
  end
  local empty = not best and g.reserved == 0
  if s.rate ~= 0 and group ~= '' then
    -- Held back by its rate alone, or emptied with a bucket not yet full: looked at again then.
    local at
    if empty then
      refill(s, g, now)
      if g.tokens < s.burst then at = tokens_at(s, g, s.burst, now) end
    elseif want == '' and best and (s.conc == 0 or g.reserved < s.conc) then
      at = tokens_at(s, g, 1, now)
    end
    local member = gfield(tube, group)
    if at then
      redis.call('ZADD', FZ, at, member)
      local lead = redis.call('ZRANGE', FZ, 0, 0)[1]
      if lead == member then fz_lead = at end
    else
      redis.call('ZREM', FZ, member)
    end
    if at and empty then save_group(tube, group, g); return end
  end
  if empty then
    forget_group(tube, group, g)
  else
    save_group(tube, group, g)
  end
end

-- The owner's look at the groups whose time in fz has come (at most `limit`).
local function flow_wakes(now, limit)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', FZ, '-inf', math.floor(now), 'LIMIT', 0, limit)) do
    redis.call('ZREM', FZ, member)
    local zero = string.find(member, '\0', 1, true)
    local tube = string.sub(member, 1, zero - 1)
    if flow_here(tube) then flow_refresh(tube, string.sub(member, zero + 1), now) end
  end
end

-- fz's first time (nil for none).
local function first_wake() return tonumber(redis.call('ZRANGE', FZ, 0, 0, 'WITHSCORES')[2]) end

-- A job of a pinned tube becomes ready, or stops being (flow_refresh() follows, in link()).
local function flow_in(tube, group, pri, id)
  redis.call('ZADD', FW, 0, wmember(tube, group, pri, id))
  if pri < 1024 then count(tube, 'u', 1) end
end

local function flow_out(tube, group, pri, id)
  redis.call('ZREM', FW, wmember(tube, group, pri, id))
  if pri < 1024 then count(tube, 'u', -1) end
  local s = flow_here(tube)
  local g = group_state(tube, group, s, now_ms())
  if g.head ~= '' and id_of(g.head) == id then
    was_head[id] = g.start
    unready(g.head)
    g.head = ''
    save_group(tube, group, g)
  end
end

-- A reservation of a pinned tube's job starts: it counts against its group; taken as the group's
-- head, it ends the group's turn.
local function flow_taken(j, now)
  local s = flow_here(j.tube)
  local g = group_state(j.tube, j.group, s, now)
  g.reserved = g.reserved + 1
  local start = was_head[j.id]
  if s.fair and start then
    if start > virtual_time(j.tube) then redis.call('HSET', FG, j.tube .. '\1', string.format('%d', start)) end
    g.finish = start + math.floor(KTURN / (s.weights[j.group] or 1))
  end
  if j.group ~= '' and s.rate ~= 0 then
    refill(s, g, now)
    g.tokens = g.tokens - 1 -- a reserve by id may take a job over the rate: the bucket owes it
  end
  save_group(j.tube, j.group, g)
end

local function flow_freed(j, now)
  local s = flow_here(j.tube)
  local g = group_state(j.tube, j.group, s, now)
  if g.reserved > 0 then g.reserved = g.reserved - 1 end
  save_group(j.tube, j.group, g)
end

-- Whether the shard holds any job of the tube.
local function holds_jobs(tube)
  local c = redis.call('HMGET', C, tube .. '\0d', tube .. '\0v')
  for i = 1, 2 do if tonumber(c[i] or '0') > 0 then return true end end
  return first(R, tube, 1)[1] ~= nil or first(B, tube, 1)[1] ~= nil or first(FW, tube, 1)[1] ~= nil
end

-- Every group of a pinned tube with state here, as (group, its fg entry).
local function each_group(tube, visit)
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', FG, cursor, 'MATCH', tube .. '\0*', 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do visit(string.sub(page[2][i], #tube + 2), page[2][i + 1]) end
  until cursor == '0'
end
