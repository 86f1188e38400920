-- timers.lua — the timer pages (drawn in head.lua): noting, applying and walking entries.

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

-- The page before `name` (nil: none).
local function previous_page(name)
  return redis.call('ZREVRANGEBYLEX', TI, '(' .. name, '-', 'LIMIT', 0, 1)[1]
end

-- Page `name` holds `entries` now, and held `before` bytes. A page that falls under a quarter
-- full joins its next page (the one before, if it is the last), and the two become one page if
-- they fit in one, else two of equal size: so every page but a shard's only one holds at least
-- a quarter of PAGE_MAX (pages emptied by cancellations do not stay many and small, each
-- costing its index entry and its field), and a page reads its neighbours only as it falls.
local function settle(name, entries, before)
  local quarter = PAGE_MAX / 4 * TW
  if #entries > 0 and #entries < quarter and before >= quarter then
    local first, second = name, next_page(name)
    if not second then first, second = previous_page(name), name end
    if first then
      entries = first == name and entries .. page(second) or page(first) .. entries
      redis.call('ZREM', TI, second)
      pages[second] = false
      dirty[second] = true
      name = first
      if #entries > PAGE_MAX * TW then
        local half = math.floor(#entries / TW / 2) * TW
        store(nil, string.sub(entries, half + 1)) -- named after its first entry
        entries = string.sub(entries, 1, half)
      end
    end
  end
  store(name, entries)
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
    settle(name, table.concat(out), before)
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
