-- writes.lua — what a call reads and writes: records as the call left them, writes gathered for
-- the call's end (made by flush(), moves.lua), heads as the nodes compare them, tube counters.

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
-- tube -> its best member of r before this call first took one out (remove_ready()): where the
-- tube's best changed by the call's end, nodes are told the new one ('h'), so that none goes on
-- to ask the shard for a job another node took.
local taken
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

-- Stores the job's record as it is now, for flush(); returns it.
local function save(j)
  local rec = encode(j)
  records[fid(j.id)] = rec
  return rec
end

-- A ready job (its member of r) as nodes compare the shards' best: 'priority:created:id', created
-- in whole milliseconds. Within a shard ids follow the order of puts; across shards, the time of
-- the put (on the shard's Redis's clock) does. Also the record it read (nil: none, or the head
-- was the one made last, memo.head).
local function head_of(tube, member)
  if memo.head_member == member then return memo.head end
  local id = id_of(member)
  local rec = stored(fid(id))
  local created = 0
  if rec then created = math.floor(select(6, record_head(rec, 6))) end
  local head = string.format('%d:%d:%d', tonumber(string.sub(member, #tube + 2, #tube + 11)),
    created, id)
  memo.head_member, memo.head = member, head
  return head, rec
end

-- The job of a member of r, from its record as head_of() read it (nil: read now).
local function load_member(member, rec)
  if not rec then return load(id_of(member)) end
  local j = decode(rec)
  j.id = id_of(member)
  return j
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

-- The tube's best member of r (false: none). Whoever writes r forgets it (memo.r_tube = nil).
local function first_ready(tube)
  if memo.r_tube ~= tube then memo.r_tube, memo.r_first = tube, first(R, tube, 1)[1] or false end
  return memo.r_first
end

-- A member of r about to leave it: its tube's best before this call first took one out (for
-- tell_heads()).
local function note_taken(member)
  local tube = string.sub(member, 1, string.find(member, '\0', 1, true) - 1)
  if taken[tube] == nil then taken[tube] = first_ready(tube) end
end

-- A call's gathered writes, empty at its start (run()).
local function begin_writes()
  readied, records, readies, counters, seen, names = {}, {}, {}, {}, {}, {}
  log, moves, logged, ordered, last_t, last_id = {}, {}, 0, true, nil, nil
  added, lapses, taken = {}, {}, {}
  pages, dirty = {}, {}
end
local function count(tube, field, by)
  local of = names[tube]
  if not of then of = {}; names[tube] = of end
  local name = of[field]
  if not name then name = tube .. '\0' .. field; of[field] = name end
  counters[name] = (counters[name] or 0) + by
end
