-- jobs.lua — every change to a shard's jobs, as one atomic call (docs/redis-mode.md), assembled
-- at build time from src/broker/redis/lua/ (head, record, writes, timers, flow, moves, ops,
-- schedules, run). Loaded into Redis as a function library (redis::Script adds the name and
-- registers run()), so that what is defined here is made once per load, not at every call.
-- Called as FCALL <name> 23 <the shard's keys> <op> <args...> <number> <node>: every key of the
-- shard, always all of them and in this order, so that Redis sees every key a call may touch;
-- a call that changes something has a number (run.lua), and a 24th key, its node's kept
-- answers. They share the shard's hash tag, "<prefix>:{<shard>}" (the prefix is "dq" unless
-- configured), hence one slot, which the shard's channel "<prefix>:{<shard>}:events" shares (sharded pub/sub); and while a slot migrates, Redis runs a script only
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
--  17 s      hash    schedules whose names hash here: name -> record (schedules.lua)
--  18 sm     hash    schedule name -> "<generation>:<instant>", its latest run put here
--  19 st     zset    the same names by when their mark was last set (ms)
--  20 f, 21 fg, 22 fw, 23 fz   flow control of the tubes pinned to one shard (flow.lua)
--  24 ans:<node>  hash  call number -> its answer (MessagePack), kept until the node has it
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
local S, SM, ST
local LAYOUT = 2  -- a record's first object
local FIELDS = 18 -- and its objects before the body
local V1 = '>BBI4ddddI4I4I4I4I4I4I4c0I4c0I4c0I4c0' -- a layout 1 record, before the body
local DELAYED, READY, RESERVED, BURIED = 0, 1, 2, 3
-- A field of c that no tube's counter can be (a tube name is not empty): when the shard's owner
-- looks next, in milliseconds with their microseconds (tell_owner(), moves.lua; older versions
-- wrote whole milliseconds).
local ARMED = '\0armed'

-- What a call read and may need again, so that it asks Redis once (emptied by enter(), run.lua):
-- pause_tube and pause_until, the pause of the tube it looked at last (unpaused(), ops.lua);
-- r_tube and r_first, the best member of r of the tube it looked at last, until r changes
-- (first_ready(), writes.lua); head_member and head, the head it made last (head_of(): a
-- member's head never changes, its priority being in the member and its time of put kept for
-- good).
local memo = {}
local function forget_reads()
  memo.pause_tube, memo.r_tube, memo.head_member = nil, nil, nil
end

-- Redis's clock, read once per call: a call runs at one instant.
local clock
local function time()
  if not clock then clock = redis.call('TIME') end
  return clock
end

-- The present in milliseconds, to the microsecond (a fraction): times are kept so, and a due
-- time of now + delay fires once Redis's clock has reached that microsecond, not later.
local clock_ms
-- A putmany whose every job went in plainly (no move, refusal, replace or debounce: put_one()
-- says): the shard's counter before it.
local plain_from
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
