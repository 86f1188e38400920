-- record.lua — a job's record (layout drawn in head.lua): decode() reads either layout, encode()
-- writes layout 2, record_head() reads the first values without the rest.

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
