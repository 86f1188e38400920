-- schedules.lua — recurring schedules (docs/redis-mode.md, "Schedules"). A schedule's record
-- lives in the shard its name hashes to, in s (name -> "<version>:<generation>:<runs>:<codec>",
-- written by the node, which alone reads past the version); its runs are jobs put into the
-- shards their keys hash to, by putrun, which leaves in that shard a mark per schedule (sm:
-- name -> "<generation>:<instant>:<version>", the latest run of it put here; st: the same names by when,
-- so that marks untouched for a day go; the version is that of the record whose step put it).
-- Runs of a schedule are put in the order of their instants, so a run at or before its mark
-- here was put already: a node that puts again the runs of a step whose end it did not see (a
-- crash, a lost answer) puts none twice.

local MARK_LIFE = 86400000  -- ms: a mark not renewed for so long is dropped
local MARK_TRIM = 4         -- stale marks dropped per putrun

-- schedule_get name...: {'ok', record or '' for each}
ops.schedule_get = function()
  local out = {'ok'}
  for i = 2, #ARGV do out[#out + 1] = redis.call('HGET', S, ARGV[i]) or '' end
  return out
end

-- schedule_all: {'ok', {name, record, name, record, ...}}
ops.schedule_all = function()
  return {'ok', redis.call('HGETALL', S)}
end

-- schedule_save name version record announce: writes the record ('' deletes it) if the stored
-- one's version is `version` ('0': there is none); else {'conflict', ...}. With announce '1', the
-- shard's channel says 's <base> <name>', so that the node that owns the shard reads it again.
ops.schedule_save = function()
  local name = ARGV[2]
  local old = redis.call('HGET', S, name)
  local version = old and string.match(old, '^(%d+):') or '0'
  if version ~= ARGV[3] then return {'conflict', 'the schedule changed meanwhile'} end
  if ARGV[4] == '' then redis.call('HDEL', S, name) else redis.call('HSET', S, name, ARGV[4]) end
  if ARGV[5] == '1' then redis.call('SPUBLISH', SEVENTS, 's ' .. base .. ' ' .. name) end
  return {'ok'}
end

local function mark_of(name)
  local mark = redis.call('HGET', SM, name)
  if not mark then return nil, nil, nil end
  local generation, instant, version = string.match(mark, '^(.*):(%-?%d+):(%d+)$')
  return generation, tonumber(instant), tonumber(version)
end
local function set_mark(name, generation, instant, version)
  redis.call('HSET', SM, name, generation .. ':' .. string.format('%d', instant) .. ':' .. version)
end

-- putrun shards shard name generation instant version <9 arguments of a put>: one run of a
-- schedule, put by the step of the record's version `version`,
-- put unless its mark here says it was (reply {'ok', 'marked'}), or a job holds its key
-- ({'ok', 'exists'}); else {'ok', 'put', id}. The put never replaces.
ops.putrun = function()
  local now = now_ms()
  local name, generation, instant = ARGV[4], ARGV[5], ARGV[6] + 0
  local g, i = mark_of(name)
  if g == generation and instant <= i then return {'ok', 'marked'} end
  local r = put_one(8, now, redis.call('INCR', SEQ), ARGV[2] + 0, ARGV[3] + 0)
  if r[1] ~= 'ok' and r[1] ~= 'exists' then return r end
  set_mark(name, generation, instant, ARGV[7])
  redis.call('ZADD', ST, now, name)
  for _, stale in ipairs(redis.call('ZRANGEBYSCORE', ST, '-inf', now - MARK_LIFE, 'LIMIT', 0, MARK_TRIM)) do
    redis.call('HDEL', SM, stale)
    redis.call('ZREM', ST, stale)
  end
  if r[1] == 'exists' then return {'ok', 'exists'} end
  return {'ok', 'put', r[2]}
end

-- unrun name generation instant version tube key or_ready: withdraws a run put ahead, by a node
-- that planned from the record's version `version`, if no worker has had it: delayed, or
-- (or_ready '1') ready and never reserved. {'ok', 'deleted'} (its mark here lowered, so that the
-- same instant may be put again), {'ok', 'taken'}, or {'ok', 'gone'}. Two nodes may step a
-- schedule at once (a lease changing hands; only one's write wins): a run withdrawn already
-- (its job gone, its mark below it) answers 'deleted' to both, and a run put again by a later
-- version's step than the asker's is left alone ('taken').
ops.unrun = function()
  moved_to = flow_elsewhere(ARGV[6])
  if moved_to then return {'ok', 'gone'} end
  local name, generation, instant, version = ARGV[2], ARGV[3], ARGV[4] + 0, ARGV[5] + 0
  local g, i, v = mark_of(name)
  local mine = g == generation
  local id = tonumber(redis.call('HGET', KI, ARGV[6] .. '\0' .. ARGV[7]) or '')
  local j = id and load(id)
  if not j then
    if mine and i < instant then return {'ok', 'deleted'} end
    return {'ok', 'gone'}
  end
  if mine and i >= instant and v > version then return {'ok', 'taken'} end
  if not (j.state == DELAYED or (ARGV[8] == '1' and j.state == READY and j.reserves == 0)) then
    return {'ok', 'taken'}
  end
  erase(j)
  if mine and i >= instant then set_mark(name, generation, instant - 1, v) end
  return {'ok', 'deleted'}
end
