-- jobs.lua — every change to a shard's jobs, as one atomic call (docs/redis-mode.md). Loaded
-- into Redis as a function library (redis::Script adds the name and registers run()), so that
-- what is defined here is made once per load, not at every call.
-- Called as FCALL <name> 16 <the shard's keys> <op> <args...> <node>: every key of the shard, always
-- all of them and in this order, so that Redis sees every key a call may touch. They share
-- the shard's hash tag, "<prefix>:{<shard>}" (the prefix is "dq" unless configured), hence one
-- slot, which the shard's channel "<prefix>:{<shard>}:events" shares (sharded pub/sub); and while a slot migrates, Redis runs a script only
-- where all of them are (else TRYAGAIN or ASK), never on half a shard. Tube names, keys and
-- groups live inside these keys, never in key names.
--
--   1 seq    string  the shard's job counter; id = seq * shards + shard
--   2 j      hash    id (decimal) -> job record (layout below) with its body
--   3 a      hash    id -> attachment (push delivery; delayq's binary codec)
--   4 t      zset    reserved jobs by TTR end (ms, rounded up); member: id. (Layout 1 kept the
--                    delayed jobs here too: `upgrade` moves them into the pages.)
--   5 r      zset    ready jobs, all score 0, ordered by member: tube \0 priority(10) \0 id(16)
--   6 b      zset    buried jobs, score 0, member: tube \0 id(16)
--   7 k      hash    tube \0 key -> id
--   8 g      zset    groups, score 0, member: tube \0 len(group)(3) group id(16)
--   9 c      hash    tube \0 d delayed, v reserved, n ever put, x deleted, o TTRs lapsed
--  10 m      hash    tube -> max_attempts
--  11 p      hash    tube -> paused until (ms)
--  12 tubes  set     tubes with jobs or counts in this shard
--  13 owner, 14 epoch   the shard's lease (firing) and its fencing number
--  15 ti     zset    the timer pages' index, score 0, member: each page's name
--  16 tp     hash    timer pages: name -> the page's entries, in order
-- (The heartbeat op alone is called with the one key <prefix>:nodes.)
--
-- Timers: every delayed job by its due time (reserved jobs by their TTR's end: t), as 13-byte
-- entries, '>I6I7' = the time in milliseconds (rounded up) and the id, big-endian, so that bytes
-- sort as (time, id). They are kept in pages of at most 128 entries each, in order. A page is
-- named by an entry at or before its first (its first when it was made), and holds the entries
-- from its name up to the next page's: the page where an entry belongs is the last one named at
-- or before it, and taking entries out never renames a page. About 15 bytes of Redis a timer,
-- against 112 for a sorted-set entry of its own (docs/redis-mode.md).
--
-- Record (layout 2): MessagePack objects, then the body to the end: 2 (the layout, never a
-- layout 1 record's first byte, which is 0 or 1), flags (bit0: has attachment), state
-- (0 delayed, 1 ready, 2 reserved, 3 buried), priority, due, deadline, created (ms, to the
-- microsecond), delay (ms), ttr (s), reserves, timeouts, releases, buries, kicks, tube, key,
-- group, holder. Layout 1's records, struct '>BBI4ddddI4I4I4I4I4I4' and four '>I4'-length
-- strings, are still read, and written as layout 2 when they next change.
--
-- Replies: {<the op's reply>, <readied>}, where the op's reply is {'ok', ...} or {'<error>',
-- message} (notfound, conflict, exists, fenced, worse), and readied lists {tube, head} for each
-- tube whose best ready job in the shard the call made better (as the shard's channel says).

-- The call's arguments and keys, set by run() at each call. SEVENTS is the shard's channel:
-- 'r' and 't' go there with SPUBLISH, which reaches the nodes subscribed on the shard's primary
-- only, without crossing the cluster bus to every node as a classic PUBLISH does.
local ARGV, base, SEVENTS, SEQ, J, A, T, R, B, KI, G, C, M, P, TUBES, OWNER, EPOCH, TI, TP
local LAYOUT = 2  -- a record's first object
local FIELDS = 18 -- and its objects before the body
local V1 = '>BBI4ddddI4I4I4I4I4I4I4c0I4c0I4c0I4c0' -- a layout 1 record, before the body
local DELAYED, READY, RESERVED, BURIED = 0, 1, 2, 3

-- Redis's clock, read once per call: a call runs at one instant.
local clock
local function time()
  if not clock then clock = redis.call('TIME') end
  return clock
end

-- The present in milliseconds, to the microsecond (a fraction): times are kept so, and a due
-- time of now + delay fires once Redis's clock has reached that microsecond, not later.
local clock_ms
local function now_ms()
  if not clock_ms then
    local t = time()
    clock_ms = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  end
  return clock_ms
end

-- A time for a reply or a score: milliseconds and their microseconds, formatted as two integers
-- ('%.3f' goes through the C library's floating-point printing, several times dearer).
local function us(ms)
  local whole = math.floor(ms)
  local micros = math.floor((ms - whole) * 1000 + 0.5)
  if micros == 1000 then whole, micros = whole + 1, 0 end
  return string.format('%d.%03d', whole, micros)
end

-- An id as the field of j, a and k's values, and the member of t (the shortest form: these are
-- stored once per job); and as 16 digits where members sort by it (r, b, g).
local function fid(id) return string.format('%d', id) end
local function pad(id) return string.format('%016d', id) end

-- Members and fields that carry a tube (tube names hold no byte below '$').
local function rmember(tube, pri, id) return tube .. '\0' .. string.format('%010d', pri) .. '\0' .. pad(id) end
local function bmember(tube, id) return tube .. '\0' .. pad(id) end
local function gprefix(tube, group) return tube .. '\0' .. string.format('%03d', #group) .. group end
local function first(zset, tube, n)
  return redis.call('ZRANGEBYLEX', zset, '[' .. tube .. '\0', '(' .. tube .. '\1', 'LIMIT', 0, n)
end
local function id_of(member) return tonumber(string.sub(member, -16)) end

local function decode(rec)
  local j = {}
  if string.byte(rec, 1) == LAYOUT then
    local at, _
    at, _, j.flags, j.state, j.pri, j.due, j.deadline, j.created, j.delay, j.ttr, j.reserves,
      j.timeouts, j.releases, j.buries, j.kicks, j.tube, j.key, j.group, j.holder =
      cmsgpack.unpack_limit(rec, FIELDS)
    j.body = at < 0 and '' or string.sub(rec, at + 1)  -- at: the body's offset, -1 for none
  else
    local pos
    j.flags, j.state, j.pri, j.due, j.deadline, j.created, j.delay, j.ttr, j.reserves, j.timeouts,
      j.releases, j.buries, j.kicks, j.tube, j.key, j.group, j.holder, pos = struct.unpack(V1, rec)
    j.body = string.sub(rec, pos)
  end
  return j
end

local function encode(j)
  return cmsgpack.pack(LAYOUT, j.flags, j.state, j.pri, j.due, j.deadline, j.created, j.delay,
    j.ttr, j.reserves, j.timeouts, j.releases, j.buries, j.kicks, j.tube, j.key, j.group,
    j.holder) .. j.body
end

-- The first n values of a record (flags, state, priority, due, deadline, created), without
-- decoding the rest; in either layout.
local function record_head(rec, n)
  if string.byte(rec, 1) == LAYOUT then return select(3, cmsgpack.unpack_limit(rec, n + 1)) end
  return struct.unpack(V1, rec)
end

-- The due time of a delayed job whose timer entry says `t` (nil for another: a stray entry's).
local function due_of_record(rec, t)
  local _, state, _, due = record_head(rec, 4)
  if state == DELAYED and math.ceil(due) == t then return due end
end

-- Writes gathered during the call and made at its end (flush), one command per key and not one
-- per job: a putmany or a fire of n jobs costs one HSET, one write per timer page changed, one
-- ZADD of r and one HINCRBY per counter. load() sees the gathered records; taking a job out of r
-- drops its gathered entry too, so nothing gathered outlives a later change in the same call.
-- (Each made empty by run() at each call.)
local records  -- field -> record, for HSET j
local log      -- timer entries changed, in the order changed, until apply()
local logged   -- how many
local moves    -- and each one's change: 1 added, -1 removed
local ordered  -- whether the log holds only additions, each after the one before
local last_t, last_id -- the log's last entry
local added    -- timer entry -> true, for those this call added that may lead (leads)
local lapses   -- member of t -> TTR end (exact): reservations made in this call, for ZADD t
local pages    -- timer page -> its entries (read or changed in this call), false once deleted
local dirty    -- timer page -> true: to write (or delete) at flush
local leads    -- whether a timer this call added may have become the shard's first
local readies  -- member -> true, for ZADD r
local counters -- tube \0 counter -> change, for HINCRBY c
local seen     -- tube -> true, for SADD tubes
-- Tubes whose best ready job in the shard this call made better (or made at all), each with
-- that job's head_of(): published for every node, and answered to the calling node with the
-- op's reply, so that it need not wait for the message. (Filled by flush(), after the op.)
local readied
-- The node making the call (its last argument): its name in the message lets it skip its own.
local caller
-- Set by fire, whose caller arms its timer from the answer: flush() publishes no 't'.
local quiet

-- A record as this call left it, else as Redis holds it (false: none).
local function stored(field)
  local rec = records[field]
  if rec == nil then rec = redis.call('HGET', J, field) end
  return rec
end

local function load(id)
  local rec = stored(fid(id))
  if not rec then return nil end
  local j = decode(rec)
  j.id = id
  return j
end

local function save(j) records[fid(j.id)] = encode(j) end

-- A ready job (its member of r) as nodes compare the shards' best: 'priority:created:id', created
-- in whole milliseconds. Within a shard ids follow the order of puts; across shards, the time of
-- the put (on the shard's Redis's clock) does.
local function head_of(tube, member)
  local id = id_of(member)
  local rec = stored(fid(id))
  local created = 0
  if rec then created = math.floor(select(6, record_head(rec, 6))) end
  return string.format('%d:%d:%d', tonumber(string.sub(member, #tube + 2, #tube + 11)), created, id)
end

-- Whether head a ('priority:created:id') comes before head b.
local function before(a, b)
  local p1, c1, i1 = string.match(a, '^(%d+):(%d+):(%d+)$')
  local p2, c2, i2 = string.match(b, '^(%d+):(%d+):(%d+)$')
  p1, c1, i1, p2, c2, i2 = tonumber(p1), tonumber(c1), tonumber(i1), tonumber(p2), tonumber(c2), tonumber(i2)
  if p1 ~= p2 then return p1 < p2 end
  if c1 ~= c2 then return c1 < c2 end
  return i1 < i2
end

local names    -- tube -> field -> tube \0 field
local function count(tube, field, by)
  local of = names[tube]
  if not of then of = {}; names[tube] = of end
  local name = of[field]
  if not name then name = tube .. '\0' .. field; of[field] = name end
  counters[name] = (counters[name] or 0) + by
end

-- Timers (their pages are drawn at the top). A change is noted and made by apply(), which
-- takes the changes in order and makes each page's at once: a putmany of n jobs due together,
-- or a firing of n jobs, reads and writes their page once.
local TW, ENTRY, PAGE_MAX = 13, '>I6I7', 128

local function first_page() return redis.call('ZRANGE', TI, 0, 0)[1] end

local function earlier(t1, i1, t2, i2) return t1 < t2 or (t1 == t2 and i1 < i2) end

local function note_timer(t, id, change)
  local n = logged + 1
  logged = n
  log[n] = struct.pack(ENTRY, t, id)
  moves[n] = change
  if change < 0 or (last_t and (t < last_t or (t == last_t and id <= last_id))) then
    ordered = false
  end
  last_t, last_id = t, id
end

local function add_timer(id, at) note_timer(math.ceil(at), id, 1) end
local function remove_timer(id, at) note_timer(math.ceil(at), id, -1) end

local function page(name)
  local entries = pages[name]
  if entries == nil then
    entries = redis.call('HGET', TP, name) or ''
    pages[name] = entries
  end
  return entries or ''
end

-- The first place in entries, from `from` on, whose entry does not come before (t, id). (Most
-- new timers come after every other of their page: the last entry is looked at first.)
local function place(entries, t, id, from)
  local to = #entries / TW
  if from < to then
    local end_t, end_id = struct.unpack(ENTRY, entries, (to - 1) * TW + 1)
    if earlier(end_t, end_id, t, id) then return to end
  end
  while from < to do
    local mid = math.floor((from + to) / 2)
    local mt, mi = struct.unpack(ENTRY, entries, mid * TW + 1)
    if earlier(mt, mi, t, id) then from = mid + 1 else to = mid end
  end
  return from
end

-- The shard's first timer entry (nil: none).
local function first_timer()
  local name = first_page()
  return name and string.sub(page(name), 1, TW)
end

-- A timer entry's job's due time to the microsecond (the entry's whole millisecond for a stray
-- entry, whose job is gone or not due then).
local function exact_time(entry)
  local t, id = struct.unpack(ENTRY, entry)
  local rec = stored(fid(id))
  return rec and due_of_record(rec, t) or t
end

-- Page `name` (nil: none yet) holds `entries` now: written back, deleted when empty, named
-- again after its first entry if that comes before its name (an entry added before every
-- other; `behind`: none was), split past PAGE_MAX entries into pages of equal size (at least 43
-- entries each), each after the first named after its first entry.
local function store(name, entries, behind)
  local n = #entries / TW
  local size = n > PAGE_MAX and math.ceil(n / math.ceil(n / (PAGE_MAX / 2))) or PAGE_MAX
  local kept = false
  for i = 0, n - 1, size do
    local part = n <= size and entries or string.sub(entries, i * TW + 1, math.min(i + size, n) * TW)
    local first = i == 0 and name or string.sub(part, 1, TW)
    if i == 0 and name and not behind then
      local t, id = struct.unpack(ENTRY, part)
      local name_t, name_id = struct.unpack(ENTRY, name)
      if earlier(t, id, name_t, name_id) then first = string.sub(part, 1, TW) end
    end
    if first == name then kept = true else redis.call('ZADD', TI, 0, first) end
    pages[first] = part
    dirty[first] = true
  end
  if name and not kept then
    redis.call('ZREM', TI, name)
    pages[name] = false
    dirty[name] = true
  end
end

-- The next page after `name`, and its name's time and id (nil: none).
local function next_page(name)
  local next_name = redis.call('ZRANGEBYLEX', TI, '(' .. name, '+', 'LIMIT', 0, 1)[1]
  if next_name then return next_name, struct.unpack(ENTRY, next_name) end
end

-- New timers, in order, that all come after every timer of the page they belong to (the puts
-- of a call have one due time, and ids that grow): appended to that page, with no search.
-- False if they are not so.
local function append()
  local first_t, first_id = struct.unpack(ENTRY, log[1])
  -- Mostly the last page: then no page follows, and one call finds it.
  local name = redis.call('ZREVRANGE', TI, 0, 0)[1]
  if not name then
    store(nil, table.concat(log))
    leads = true
    for k = 1, logged do added[log[k]] = true end
    return true
  end
  local next_t, next_id
  local name_t, name_id = struct.unpack(ENTRY, name)
  if earlier(first_t, first_id, name_t, name_id) then
    local _
    name = redis.call('ZREVRANGEBYLEX', TI, '[' .. log[1], '-', 'LIMIT', 0, 1)[1]
    if not name then return false end -- before the first page
    _, next_t, next_id = next_page(name)
  end
  local entries = page(name)
  if entries == '' then return false end
  local t, id = struct.unpack(ENTRY, entries, #entries - TW + 1)
  if not earlier(t, id, first_t, first_id) then return false end
  if next_t and not earlier(last_t, last_id, next_t, next_id) then return false end
  store(name, entries .. table.concat(log), true)
  return true
end

-- Makes the noted changes: each page reads and writes once for all of its changes.
local function apply()
  if logged == 0 then return end
  local done = ordered and append()
  local list, net = {}, {}
  if not done then
    leads = true
    -- Each entry's last change counts (adding an entry that is there, or removing one that is
    -- not, changes nothing).
    for k = 1, logged do
      net[log[k]] = moves[k]
      added[log[k]] = moves[k] > 0 or nil
    end
    for entry, change in pairs(net) do
      local t, id = struct.unpack(ENTRY, entry)
      list[#list + 1] = {t, id, change, entry}
    end
    table.sort(list, function(a, b) return earlier(a[1], a[2], b[1], b[2]) end)
  end
  log, moves, logged, ordered, last_t, last_id = {}, {}, 0, true, nil, nil
  local i = 1
  while i <= #list do
    local entry = list[i][4]
    -- The page where it belongs: the last named at or before it, else the first.
    local name = redis.call('ZREVRANGEBYLEX', TI, '[' .. entry, '-', 'LIMIT', 0, 1)[1] or first_page()
    local _, next_t, next_id -- the next page's name: the changes before it are this page's
    if name and i < #list then _, next_t, next_id = next_page(name) end
    local entries = name and page(name) or ''
    local out, at = {}, 0 -- at: the entries taken (kept or dropped) so far
    repeat
      local t, id, change, e = list[i][1], list[i][2], list[i][3], list[i][4]
      local p = place(entries, t, id, at)
      out[#out + 1] = string.sub(entries, at * TW + 1, p * TW)
      at = p
      if string.sub(entries, p * TW + 1, p * TW + TW) == e then at = p + 1 end -- there already
      if change > 0 then out[#out + 1] = e end
      i = i + 1
    until i > #list or (next_t and not earlier(list[i][1], list[i][2], next_t, next_id))
    out[#out + 1] = string.sub(entries, at * TW + 1)
    local before = #entries
    entries = table.concat(out)
    -- A page that falls under a quarter full takes in the next one, if both fit one page: so
    -- pages emptied by deletes do not stay many and small (each costs its index entry and its
    -- field). (A split makes pages of at least 43 entries: a page under a quarter full has
    -- fallen there, or is the shard's only page.)
    local quarter = PAGE_MAX / 4 * TW
    if #entries > 0 and #entries < quarter and before >= quarter then
      local next_name = name and next_page(name)
      if next_name and #entries + #page(next_name) <= PAGE_MAX * TW then
        entries = entries .. page(next_name)
        redis.call('ZREM', TI, next_name)
        pages[next_name] = false
        dirty[next_name] = true
      end
    end
    store(name, entries)
  end
end

-- Calls visit(t, id) for the shard's timers in order, until it answers false. (`first`: the
-- first page's name, when the caller has just read it.)
local function each_timer(visit, first)
  apply()
  local name = first or first_page()
  while name do
    local entries = page(name)
    for k = 0, #entries / TW - 1 do
      if not visit(struct.unpack(ENTRY, entries, k * TW + 1)) then return end
    end
    name = next_page(name)
  end
end

local function remove_ready(member)
  readies[member] = nil
  redis.call('ZREM', R, member)
end

-- Runs cmd key with the flat list of arguments, a thousand pairs per call (Lua's stack bounds
-- how many arguments one call can take).
local function in_chunks(cmd, key, list)
  for i = 1, #list, 2000 do redis.call(cmd, key, unpack(list, i, math.min(i + 1999, #list))) end
end

-- The reservations made in this call, into t. (No message tells the owner of one: a TTR is a
-- whole number of seconds, at least one, and the owner looks at each of its shards at least
-- every second (resync), so it learns of a reservation's end before it comes.)
local function write_lapses()
  local list, n = {}, 0
  for member, at in pairs(lapses) do
    list[n + 1] = string.format('%d', math.ceil(at)); list[n + 2] = member; n = n + 2
  end
  lapses = {}
  in_chunks('ZADD', T, list)
end

local function flush()
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
  write_lapses()
  -- A due time this call added earlier than every other of the shard's delayed jobs: the owner
  -- must re-arm. (A put appended after a page's entries cannot be. The owner, which fires at
  -- once on the message, may find a reservation's end earlier still: it re-arms from that.)
  if leads and not quiet then
    local first = first_timer()
    if first and added[first] then
      redis.call('SPUBLISH', SEVENTS, 't ' .. base .. ' ' .. string.format('%d', exact_time(first)))
    end
  end
  -- The best new ready job of each tube, against the best the shard holds before they are added:
  -- where it is better, nodes learn of it, so that a reserve takes the best job of every shard.
  local best = {}
  list = {}
  for member in pairs(readies) do
    table.insert(list, 0); table.insert(list, member)
    local tube = string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
    if not best[tube] or member < best[tube] then best[tube] = member end
  end
  for tube, member in pairs(best) do
    local head = first(R, tube, 1)[1]
    if not head or member < head then
      local h = head_of(tube, member)
      redis.call('SPUBLISH', SEVENTS, 'r ' .. base .. ' ' .. tube .. ' ' .. (caller or '-') .. ' ' .. h)
      table.insert(readied, {tube, h})
    end
  end
  in_chunks('ZADD', R, list)
  for name, by in pairs(counters) do
    if by ~= 0 then redis.call('HINCRBY', C, name, by) end
  end
  list = {}
  for tube in pairs(seen) do table.insert(list, tube) end
  in_chunks('SADD', TUBES, list)
end

local function make_ready(tube, pri, id) readies[rmember(tube, pri, id)] = true end

-- Takes the job out of wherever its state keeps it (not the record, key or group).
local function unlink(j)
  if j.state == DELAYED then
    remove_timer(j.id, j.due); count(j.tube, 'd', -1)
  elseif j.state == READY then
    remove_ready(rmember(j.tube, j.pri, j.id))
  elseif j.state == RESERVED then
    local member = fid(j.id)
    lapses[member] = nil
    redis.call('ZREM', T, member)
    count(j.tube, 'v', -1)
  else
    redis.call('ZREM', B, bmember(j.tube, j.id))
  end
end

-- Puts the job where its (new) state keeps it.
local function link(j, now)
  if j.state == DELAYED then
    add_timer(j.id, j.due); count(j.tube, 'd', 1)
  elseif j.state == READY then
    make_ready(j.tube, j.pri, j.id)
  elseif j.state == RESERVED then
    lapses[fid(j.id)] = j.deadline; count(j.tube, 'v', 1)
  else
    redis.call('ZADD', B, 0, bmember(j.tube, j.id))
  end
end

-- A job changes state: out of where it was, changed, stored, and into where it is now kept.
local function move(j, now, change)
  unlink(j)
  change(j)
  save(j)
  link(j, now)
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

-- The first n delayed jobs of a tube, earliest due first. Delayed jobs of every tube share the
-- timers, so this walks them in order: it costs the timers before the tube's n-th job.
local function delayed_of(tube, n)
  local found = {}
  if n < 1 then return found end
  each_timer(function(_, id)
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
end

local function reply(j, now)
  local attachment = false
  if j.flags % 2 == 1 then attachment = redis.call('HGET', A, fid(j.id)) or false end
  return {'ok', string.format('%d', j.id), encode(j), attachment, string.format('%d', now)}
end

-- A job id given by the caller: by id, or by tube and key (ARGV[i] = id or '', ARGV[i+1] tube,
-- ARGV[i+2] key).
local function find(i)
  local id = tonumber(ARGV[i])
  if ARGV[i] == '' then
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

local ops = {}

-- One put, its 9 arguments from ARGV[a]: tube pri delay_or_at absolute replace key group
-- attachment tail, where tail is the new record after its times as the node packs it (the TTR,
-- five zero counters, the tube, key and group, no holder, then the body); seq is the job's number
-- in the shard, and its id seq * shards + shard. Replies {'ok', id, due, replaced id or 0}
-- (integers), or {'exists', <reply() of the job holding the key>}, or {'conflict', why}.
-- (A numeric argument is read as ARGV[i] + 0: tonumber() would convert the string twice.)
local function put_one(a, now, seq, shards, shard)
  local tube, key, group = ARGV[a], ARGV[a + 5], ARGV[a + 6]
  local replaced = 0
  if key ~= '' then
    local holder = redis.call('HGET', KI, tube .. '\0' .. key)
    if holder then
      local old = load(tonumber(holder))
      if ARGV[a + 4] ~= '1' then
        local r = reply(old, now); r[1] = 'exists'; return r
      end
      if old.state == RESERVED then return {'conflict', 'the job holding the key is reserved'} end
      erase(old)
      replaced = old.id
    end
  end
  -- The hot path: the new job's record and links are made from locals, without the table that
  -- load() makes (save() and link() of such a table do the same), and the record from the
  -- node's tail (encode() of such a table makes the same bytes).
  local id = seq * shards + shard
  local field = fid(id)
  local pri = ARGV[a + 1] + 0
  local due, delay, state = due_of(ARGV[a + 2] + 0, ARGV[a + 3], now)
  local flags = 0
  if ARGV[a + 7] ~= '' then
    flags = 1
    redis.call('HSET', A, field, ARGV[a + 7])
  end
  records[field] = cmsgpack.pack(LAYOUT, flags, state, pri, due, 0, now, delay) .. ARGV[a + 8]
  if state == DELAYED then
    add_timer(id, due); count(tube, 'd', 1)
  else
    make_ready(tube, pri, id)
  end
  if key ~= '' then redis.call('HSET', KI, tube .. '\0' .. key, field) end
  if group ~= '' then redis.call('ZADD', G, 0, gprefix(tube, group) .. pad(id)) end
  seen[tube] = true
  count(tube, 'n', 1)
  -- The caller knows the rest of the job: its id, due time and the present (which the call
  -- answers once) are enough, and the body does not travel back.
  return {'ok', id, due, replaced}
end

-- The best ready job of each tube named from ARGV[from] on, as head_of() gives it ('' for none,
-- or for a paused tube): what a node keeps of the shard, to try the best shard first; and how
-- many ready jobs each has here, up to DEPTH (the node sends that many reserves at once).
local DEPTH = 8
local function heads(from, now)
  local out, depth = {}, {}
  for i = from, #ARGV do
    local h, n = '', 0
    if tonumber(redis.call('HGET', P, ARGV[i]) or '0') <= now then
      local members = first(R, ARGV[i], DEPTH)
      if members[1] then h = head_of(ARGV[i], members[1]) end
      n = #members
    end
    out[#out + 1] = h
    depth[#depth + 1] = n
  end
  return out, depth
end

-- The best ready job (its member of r, and its head) of the tubes ARGV[from..to] that are not
-- paused, in the order nodes compare heads (head_of(): priority, age, id). With `fresh` (tube ->
-- members this call made ready, which reach r only at flush()), those count too while they are
-- still ready.
local function best_ready(from, to, now, fresh)
  local best, best_head
  for i = from, to do
    local tube = ARGV[i]
    if tonumber(redis.call('HGET', P, tube) or '0') <= now then
      local member = first(R, tube, 1)[1]
      for _, new in ipairs(fresh and fresh[tube] or {}) do
        if readies[new] and (not member or new < member) then member = new end
      end
      if member then
        local head = head_of(tube, member)
        if not best or before(head, best_head) then best, best_head = member, head end
      end
    end
  end
  return best, best_head
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
      local best = best_ready(i + 2, i + 1 + n, now, fresh)
      if not best then break end
      local j = load(id_of(best))
      if j then
        move(j, now, take(holder, now))
        served[#served] = reply(j, now)
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
  if r[1] == 'ok' then
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
  for a = 5, 4 + 9 * n, 9 do
    seq = seq + 1
    out[#out + 1] = put_one(a, now, seq, shards, shard)
  end
  out[#out + 1] = serve(5 + 9 * n, now)
  return out
end

-- reserve holder bound tube... : the best ready job of the tubes in this shard (best_ready()),
-- unless bound (the best the node knows of in the other shards; '' for none) comes before it:
-- then {'worse', message, heads, depths}. The reply is reply()'s and a sixth and seventh element,
-- the tubes' heads() and depths after the reserve; 'notfound' carries them third and fourth.
ops.reserve = function()
  local now = now_ms()
  local best, best_head = best_ready(4, #ARGV, now)
  if not best then
    local h, d = heads(4, now)
    return {'notfound', 'no ready job', h, d}
  end
  if ARGV[3] ~= '' and before(ARGV[3], best_head) then
    local h, d = heads(4, now)
    return {'worse', 'a better job in another shard', h, d}
  end
  local j = load(id_of(best))
  move(j, now, take(ARGV[2], now))
  local r = reply(j, now)
  r[6], r[7] = heads(4, now)
  return r
end

-- probe tube...: {'ok', heads, depths} of the tubes in this shard.
ops.probe = function()
  local h, d = heads(2, now_ms())
  return {'ok', h, d}
end

-- reserve_job holder id: any state but reserved.
ops.reserve_job = function()
  local j = load(tonumber(ARGV[3]))
  if not j or j.state == RESERVED then return {'notfound', 'no such job, or it is reserved'} end
  local now = now_ms()
  move(j, now, take(ARGV[2], now))
  return reply(j, now)
end

-- erase holder id tube key: any job not reserved by another.
ops.erase = function()
  local j = find(3)
  if not j then return {'notfound', 'no such job'} end
  if j.state == RESERVED and j.holder ~= ARGV[2] then
    return {'conflict', 'the job is reserved by another client'}
  end
  erase(j)
  return {'ok', string.format('%d', j.id)}
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
  save(j)
  link(j, now)
  return reply(j, now)
end

-- bury holder id pri(or '')
ops.bury = function()
  local j, err = held(tonumber(ARGV[3]), ARGV[2], '')
  if not j then return err end
  local now = now_ms()
  move(j, now, function()
    j.holder = ''; j.deadline = 0; j.state = BURIED; j.buries = j.buries + 1
    if ARGV[4] ~= '' then j.pri = tonumber(ARGV[4]) end
  end)
  return reply(j, now)
end

-- touch holder id
ops.touch = function()
  local j, err = held(tonumber(ARGV[3]), ARGV[2], '')
  if not j then return err end
  local now = now_ms()
  move(j, now, function() j.deadline = now + j.ttr * 1000 end)
  return reply(j, now)
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
    local head = first(state == 'ready' and R or B, tube, 1)
    if not head[1] then return {'notfound', 'none'} end
    return reply(load(id_of(head[1])), now)
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
  move(j, now, kicked(now))
  return reply(j, now)
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
      remove_ready(rmember(j.tube, j.pri, j.id))
      readies[rmember(j.tube, pri, j.id)] = true
    end
    j.pri = pri
    save(j)
  end
  return reply(j, now)
end

-- group tube group cancel(0/1) holder: the group's jobs; cancel deletes those not reserved.
ops.group = function()
  local prefix = gprefix(ARGV[2], ARGV[3])
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
-- timeouts}; with no
-- tube, every tube of the shard.
ops.stats = function()
  local tubes = {}
  for i = 2, #ARGV do table.insert(tubes, ARGV[i]) end
  if #tubes == 0 then tubes = redis.call('SMEMBERS', TUBES) end
  local out = {'ok'}
  for _, tube in ipairs(tubes) do
    local c = redis.call('HMGET', C, tube .. '\0v', tube .. '\0d', tube .. '\0n', tube .. '\0x',
      tube .. '\0o')
    local from, to = '[' .. tube .. '\0', '(' .. tube .. '\1'
    table.insert(out, {tube, redis.call('ZLEXCOUNT', R, from, to),
      redis.call('ZLEXCOUNT', R, from, '(' .. tube .. '\0' .. '0000001024'),
      tonumber(c[1] or '0'), tonumber(c[2] or '0'), redis.call('ZLEXCOUNT', B, from, to),
      tonumber(c[3] or '0'), tonumber(c[4] or '0'), tonumber(c[5] or '0')})
  end
  return out
end

-- pause tube ms: no job of the tube is reserved from this shard for ms (0 ends a pause).
ops.pause = function()
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
  quiet = true
  return {'ok', moved, next_at and us(next_at) or '-1', us(now), late, served}
end

-- overdue: the shard's earliest timer (or -1) and the present, by Redis's clock. Any node may
-- ask: a timer far behind the present means nobody fires the shard.
ops.overdue = function()
  local first = first_timer()
  local at = first and struct.unpack(ENTRY, first)
  local lapse = tonumber(redis.call('ZRANGE', T, 0, 0, 'WITHSCORES')[2])
  if lapse and (not at or lapse < at) then at = lapse end
  return {'ok', at and string.format('%d', at) or '-1', us(now_ms())}
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

-- acquire node lease_ms: takes the lease if free; replies with the new epoch, or 'fenced'.
ops.acquire = function()
  if not redis.call('SET', OWNER, ARGV[2], 'NX', 'PX', ARGV[3]) then
    return {'fenced', redis.call('GET', OWNER) or ''}
  end
  return {'ok', redis.call('INCR', EPOCH)}
end

-- renew node lease_ms epoch
ops.renew = function()
  if redis.call('GET', OWNER) ~= ARGV[2] or redis.call('GET', EPOCH) ~= ARGV[4] then
    return {'fenced', 'lost'}
  end
  redis.call('PEXPIRE', OWNER, ARGV[3])
  return {'ok'}
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

local function run(keys, args)
  ARGV = args
  caller = table.remove(ARGV)
  base = string.gsub(keys[1], ':seq$', '')
  SEVENTS = base .. ':events'
  SEQ, J, A, T, R, B, KI, G, C, M, P, TUBES, OWNER, EPOCH, TI, TP = keys[1], keys[2], keys[3],
    keys[4], keys[5], keys[6], keys[7], keys[8], keys[9], keys[10], keys[11], keys[12], keys[13],
    keys[14], keys[15], keys[16]
  clock, clock_ms, quiet, leads = nil, nil, false, false
  readied, records, readies, counters, seen, names = {}, {}, {}, {}, {}, {}
  log, moves, logged, ordered, last_t, last_id = {}, {}, 0, true, nil, nil
  added, lapses = {}, {}
  pages, dirty = {}, {}
  local handler = ops[args[1]]
  if not handler then
    return redis.error_reply('ERR delayq: unknown operation ' .. tostring(args[1]))
  end
  local result = handler()
  flush()
  return {result, readied}
end
